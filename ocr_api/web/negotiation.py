"""What a request may ask for: its Accept header and its query parameters are checked, not
ignored, so a client's typo or wrong expectation gets an answer that names it."""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from uocr_core.errors import InvalidRequest

JSON = "application/json"


def _ranges(accept: str) -> list[tuple[str, float]]:
    """``text/*;q=0.5, application/json`` -> [("text/*", 0.5), ("application/json", 1.0)]."""
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media:
            ranges.append((media.lower(), quality))
    return ranges


def _quality(ranges: list[tuple[str, float]], media_type: str) -> float:
    """The quality of the most specific range that matches (RFC 9110 12.5.1)."""
    kind = media_type.split("/")[0]
    best: tuple[int, float] = (-1, 0.0)
    for media, quality in ranges:
        specificity = (
            2 if media == media_type else 1 if media == f"{kind}/*" else 0 if media == "*/*" else -1
        )
        if specificity > best[0]:
            best = (specificity, quality)
    return best[1]


def choose(accept: str | None, offered: list[str]) -> str | None:
    """The offered media type the client prefers (the first offered on a tie); None: none."""
    if not accept or not accept.strip():
        return offered[0]
    ranges = _ranges(accept)
    scored = [(_quality(ranges, media), -i, media) for i, media in enumerate(offered)]
    quality, _, media = max(scored)
    return media if quality > 0 else None


def require(request: Request, offered: list[str]) -> str:
    """The media type to answer with, or 406 naming what this route can answer with."""
    accept = request.headers.get("accept")
    media = choose(accept, offered)
    if media is None:
        raise HTTPException(
            406, f"Accept: {accept} excludes what this route answers with: {', '.join(offered)}"
        )
    return media


def client_has(request: Request, etag: str) -> bool:
    """A conditional GET whose copy is current (If-None-Match names this ETag): answer 304."""
    return etag in {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}


def accepts_json(request: Request) -> None:
    """A dependency of JSON routes (errors are JSON too, so a client asking for problem+json
    alone is answered)."""
    require(request, [JSON, "application/problem+json"])


def known_query_only(request: Request) -> None:
    """A dependency: a query parameter the route does not take is refused, not ignored
    (``?staus=failed`` would otherwise list every job)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _query_names(route.dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; this route takes: {takes}",
            loc=("query", unknown[0]),
        )


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
