"""The OpenAPI document says what the API really answers: every status a route can return,
errors as ``application/problem+json``, and the headers a client can rely on."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ocr_api.web.problems import PROBLEM_MEDIA_TYPE, Problem

_DESCRIPTIONS = {
    400: "The request cannot be parsed (a malformed body or header)",
    401: "Missing, invalid, revoked or expired API key (type key-expired: use its successor)",
    404: "No such job (another tenant's job is reported the same way)",
    406: "The Accept header excludes every media type this route can answer with",
    409: "Conflicts with the job's state (not finished yet, already finished, key reused)",
    410: "The job's document and results were deleted (by retention or DELETE)",
    413: "The upload or the page count is over the limit",
    415: "The document is not a PDF or a page image",
    422: "Invalid parameters or body; `errors` lists each field",
    429: "The queue is full; retry after Retry-After seconds",
    500: "A server bug; quote the request_id",
    503: "A dependency (database, task queue, object store) is down; retry after Retry-After",
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entries of a route for the error statuses it can answer."""
    return {status: {"model": Problem, "description": _DESCRIPTIONS[status]} for status in statuses}


# Every authenticated route can answer these, whatever it does (400: a body that is not
# even parseable).
COMMON_PROBLEMS = problems(400, 401, 406, 422, 500, 503)

# Routes whose answers carry an ETag may answer a conditional GET with this.
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the client's copy (If-None-Match) is current"}
}

_RETRY_AFTER = {"description": "seconds to wait", "schema": {"type": "integer"}}
_REQUEST_ID = {
    "description": "the request's id (yours from X-Request-ID, or one made for it)",
    "schema": {"type": "string"},
}


def install_openapi(app: FastAPI) -> None:
    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            for path in document["paths"].values():
                for operation in path.values():
                    _describe_responses(operation["responses"])
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


def _describe_responses(responses: dict[str, Any]) -> None:
    for status, response in responses.items():
        headers = response.setdefault("headers", {})
        headers["X-Request-ID"] = _REQUEST_ID
        if status in ("429", "503"):
            headers["Retry-After"] = _RETRY_AFTER
        content = response.get("content", {})
        schema = content.get("application/json", {}).get("schema", {})
        if schema.get("$ref", "").endswith("/Problem"):
            content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")
