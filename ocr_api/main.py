"""The HTTP API: create_app() wires routers, shared clients, the middleware and the one error
translation (every error is a problem details body)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ocr_api.batches.router import router as batches_router
from ocr_api.console.console_files import ConsoleFiles
from ocr_api.deps import AppState
from ocr_api.health.router import router as health_router
from ocr_api.jobs.page_image_router import router as page_image_router
from ocr_api.jobs.results_router import router as results_router
from ocr_api.jobs.router import router as jobs_router
from ocr_api.metrics import ServiceCollector
from ocr_api.review.router import router as review_router
from ocr_api.search.router import router as search_router
from ocr_api.uploads.router import router as uploads_router
from ocr_api.version_metrics import VersionCollector
from ocr_api.web.docs import install_docs
from ocr_api.web.methods import MethodsMiddleware
from ocr_api.web.openapi import install_openapi
from ocr_api.web.problems import install_problem_handlers
from ocr_api.web.request_id import HEADER as REQUEST_ID_HEADER
from ocr_api.web.request_id import RequestIdMiddleware
from uocr_core.logging import configure_logging
from uocr_core.settings import Settings, get_settings

# Headers a browser client on an allowed origin may read from an answer.
_EXPOSED_HEADERS = [
    REQUEST_ID_HEADER,
    "Location",
    "ETag",
    "Retry-After",
    "Idempotent-Replayed",
    "Content-Disposition",
]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = AppState.build(settings)
        app.state.uocr = state
        registry = CollectorRegistry()
        registry.register(ServiceCollector(state))
        registry.register(VersionCollector(state))
        app.state.registry = registry
        yield

    app = FastAPI(
        title="uocr",
        version="0.1.0",
        lifespan=lifespan,
        description="Batch OCR for long documents: submit, poll, get a webhook.",
        docs_url=None,
        redoc_url=None,
    )
    app.include_router(jobs_router)
    app.include_router(results_router)
    app.include_router(page_image_router)
    app.include_router(uploads_router)
    app.include_router(batches_router)
    app.include_router(review_router)
    app.include_router(search_router)
    app.include_router(health_router)
    app.mount("/console", ConsoleFiles(), name="console")  # the web console (issue 14)

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)

    install_docs(app)
    install_openapi(app)
    install_problem_handlers(app)
    # Outermost last: CORS answers preflights before anything else; every other answer, even
    # an OPTIONS one, carries the request id.
    app.add_middleware(MethodsMiddleware, starlette_app=app)
    app.add_middleware(RequestIdMiddleware)
    if settings.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_allow_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", REQUEST_ID_HEADER],
            expose_headers=_EXPOSED_HEADERS,
            max_age=600,
        )
    return app
