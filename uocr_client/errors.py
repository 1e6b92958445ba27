"""The API's problem details as one exception a caller can inspect."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """An answer of 4xx or 5xx: ``kind`` is the problem type's last part (``not-found``,
    ``conflict``, ``queue-full``…), ``request_id`` what to quote to the operators."""

    def __init__(self, status: int, kind: str, detail: str, request_id: str, body: Any) -> None:
        super().__init__(f"{status} {kind}: {detail} (request {request_id})")
        self.status = status
        self.kind = kind
        self.detail = detail
        self.request_id = request_id
        self.body = body

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:500]}
        kind = str(body.get("type", "")).rsplit(":", 1)[-1] or "error"
        return cls(
            response.status_code,
            kind,
            str(body.get("detail", response.reason_phrase)),
            response.headers.get("x-request-id", ""),
            body,
        )
