"""``ConsoleFiles``: the console's assets, shipped in the package and served by the API itself
(no CDN, no separate server, nothing built at runtime), each with headers that keep a page which
holds an API key from running anything but its own scripts."""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"

# Scripts and styles from this origin only (no inline script can run, so an injected string
# cannot reach the key in sessionStorage); images also from blob: (page scans are fetched with
# the Authorization header and shown through blob URLs); the API is the only endpoint.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob: data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Revalidated every time (a 304 by ETag), so an upgraded API never runs stale modules.
    "Cache-Control": "no-cache",
}


class ConsoleFiles(StaticFiles):
    """StaticFiles with the console's security headers on every answer."""

    def __init__(self, directory: Path = STATIC_DIR) -> None:
        super().__init__(directory=directory, html=True)

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response
