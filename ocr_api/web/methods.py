"""HTTP methods answered the way clients and proxies expect: HEAD wherever GET is, OPTIONS
listing what a path allows, and a 405 whose ``Allow`` names every method of the path."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(app: Starlette, scope: Scope) -> list[str]:
    """Every method some route fully matches on this path ([] when no route has the path)."""
    methods = [
        method
        for method in _METHODS
        if any(
            route.matches({**scope, "type": "http", "method": method})[0] == Match.FULL
            for route in app.router.routes
        )
    ]
    if not methods:
        return []
    if "GET" in methods:
        methods.append("HEAD")
    return sorted([*methods, "OPTIONS"])


class MethodsMiddleware:
    """HEAD runs the GET route and sends its headers without the body; OPTIONS (not a CORS
    preflight, which the CORS middleware outside this one answers) says what the path allows."""

    def __init__(self, app: ASGIApp, starlette_app: Starlette) -> None:
        self.app = app
        self.starlette_app = starlette_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        methods = allowed_methods(self.starlette_app, scope)
        if scope["method"] == "OPTIONS" and methods:
            allow = ", ".join(methods)
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [(b"allow", allow.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["method"] == "HEAD" and "GET" in methods:
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        await self.app(scope, receive, send)


def _without_body(send: Send) -> Send:
    async def send_headers_only(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_headers_only
