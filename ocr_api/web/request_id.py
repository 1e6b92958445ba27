"""A request id on every request: taken from ``X-Request-ID`` when it is sane, made otherwise.

It is bound into the log context (every line written while the request runs carries it),
echoed in the ``X-Request-ID`` response header and put in every problem body.
"""

from __future__ import annotations

import re
import uuid

import structlog
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Request-ID"
# A proxy's id is kept only if it cannot forge log lines or headers: short, no spaces, no quotes.
_SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id_of(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id") or "")


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = Request(scope).headers.get(HEADER, "")
        request_id = given if _SANE.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)
