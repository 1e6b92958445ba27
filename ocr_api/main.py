"""The HTTP API: create_app() wires routers, shared clients and the one error translation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ocr_api.core.errors import (
    DEPENDENCY_RETRY_AFTER_SECONDS,
    DomainError,
    QueueFull,
    ServiceUnavailable,
)
from ocr_api.core.logging import configure_logging
from ocr_api.core.settings import Settings, get_settings
from ocr_api.core.transient import TRANSIENT_ERRORS
from ocr_api.deps import AppState
from ocr_api.health.router import router as health_router
from ocr_api.jobs.router import router as jobs_router
from ocr_api.metrics import ServiceCollector

log = structlog.get_logger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = AppState.build(settings)
        app.state.uocr = state
        registry = CollectorRegistry()
        registry.register(ServiceCollector(state))
        app.state.registry = registry
        yield

    app = FastAPI(
        title="uocr",
        version="0.1.0",
        lifespan=lifespan,
        description="Batch OCR for long documents: submit, poll, get a webhook.",
    )
    app.include_router(jobs_router)
    app.include_router(health_router)

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(DomainError)
    async def domain_error(_: Request, error: DomainError) -> JSONResponse:
        headers = {}
        if isinstance(error, QueueFull | ServiceUnavailable):
            headers["Retry-After"] = str(error.retry_after_seconds)
        if error.status_code == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(
            {"detail": error.message}, status_code=error.status_code, headers=headers
        )

    for transient in TRANSIENT_ERRORS:
        app.add_exception_handler(transient, _dependency_down)
    return app


async def _dependency_down(_: Request, error: Exception) -> JSONResponse:
    """Postgres or the broker is down: 503 with Retry-After, answered like any other response,
    so the client's keep-alive connection stays usable; the pool's pre-ping replaces the broken
    connections on the next request, so the API recovers without a restart."""
    log.warning("dependency.unavailable", error_type=type(error).__name__, error=str(error)[:200])
    return JSONResponse(
        {"detail": "a service dependency (database or task queue) is unavailable; retry later"},
        status_code=503,
        headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)},
    )
