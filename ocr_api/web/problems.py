"""Every error the API answers is an RFC 9457 problem: one machine-readable body, everywhere.

``type`` is a stable URN a client can switch on, ``detail`` says what was wrong with this
request, ``request_id`` is what to quote in a support ticket (it is in the logs too).
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from ocr_api.web.methods import allowed_methods
from ocr_api.web.request_id import request_id_of
from uocr_core.errors import (
    DEPENDENCY_RETRY_AFTER_SECONDS,
    DomainError,
    QueueFull,
    ServiceUnavailable,
)
from uocr_core.transient import TRANSIENT_ERRORS

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:uocr:problem:"

log = structlog.get_logger(__name__)


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="where: ['query', 'limit'], ['body', 'metadata']")
    msg: str
    type: str


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = Field(examples=[f"{TYPE_PREFIX}not-found"])
    title: str = Field(examples=["Not found"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["job 3f0c… not found"])
    instance: str = Field(description="the request path", examples=["/v1/jobs/3f0c…"])
    request_id: str = Field(description="also in the server's logs and the X-Request-ID header")
    errors: list[FieldError] | None = Field(None, description="422: one entry per invalid field")


# Titles of errors raised by the framework itself (routing, methods, negotiation).
_HTTP_PROBLEMS: dict[int, tuple[str, str]] = {
    400: ("bad-request", "Bad request"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    406: ("not-acceptable", "Not acceptable"),
    413: ("payload-too-large", "The request is too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
    422: ("invalid-request", "The request is invalid"),
}


def problem(
    request: Request,
    *,
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    request_id = request_id_of(request)
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        "request_id": request_id,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(
        jsonable_encoder(body),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers={**(headers or {}), "X-Request-ID": request_id},
    )


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, DomainError)
    headers = {}
    if isinstance(error, QueueFull | ServiceUnavailable):
        headers["Retry-After"] = str(error.retry_after_seconds)
    if error.status_code == 401:
        headers["WWW-Authenticate"] = "Bearer"
    errors = None
    if error.status_code == 422:
        loc = list(getattr(error, "loc", ()))
        errors = [{"loc": loc, "msg": error.message, "type": error.slug}] if loc else []
    return problem(
        request,
        status=error.status_code,
        slug=error.slug,
        title=error.title,
        detail=error.message,
        headers=headers,
        errors=errors,
    )


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors = [
        {"loc": list(item.get("loc", ())), "msg": item.get("msg", ""), "type": item.get("type", "")}
        for item in error.errors()
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(part) for part in first["loc"])
    return problem(
        request,
        status=422,
        slug="invalid-request",
        title="The request is invalid",
        detail=f"{where}: {first['msg']}" if where else str(first["msg"]),
        errors=errors,
    )


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    slug, title = _HTTP_PROBLEMS.get(error.status_code, ("http-error", "HTTP error"))
    headers = dict(error.headers or {})
    detail = str(error.detail)
    if error.status_code == 405:
        methods = allowed_methods(request.app, request.scope)
        headers["Allow"] = ", ".join(methods)
        detail = (
            f"{request.method} is not allowed on {request.url.path}; allowed: {headers['Allow']}"
        )
    elif error.status_code == 404 and detail == "Not Found":
        detail = f"no such route: {request.url.path}"
    return problem(
        request, status=error.status_code, slug=slug, title=title, detail=detail, headers=headers
    )


async def _dependency_down(request: Request, error: Exception) -> JSONResponse:
    """Postgres, the broker or the object store is down: 503 with Retry-After, answered like
    any other response, so the client's keep-alive connection stays usable; the pool's pre-ping
    replaces the broken connections on the next request, so the API recovers without a
    restart."""
    log.warning("dependency.unavailable", error_type=type(error).__name__, error=str(error)[:200])
    return problem(
        request,
        status=503,
        slug="service-unavailable",
        title="Temporarily unavailable",
        detail=(
            "a service dependency (database, task queue or object store) is unavailable; "
            "retry later"
        ),
        headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)},
    )


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    """A bug: the client gets a problem it can quote; the traceback goes to the log."""
    log.error("request.failed", exc_info=error, path=request.url.path)
    return problem(
        request,
        status=500,
        slug="internal-error",
        title="Internal error",
        detail="the server failed to answer this request; quote the request id if you report it",
    )


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    for transient in TRANSIENT_ERRORS:
        app.add_exception_handler(transient, _dependency_down)
    app.add_exception_handler(Exception, _unexpected)
