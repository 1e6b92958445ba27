"""Bounds on what a submit may carry, checked before anything is parsed, stored or echoed back.

A body is counted while it streams (a chunked request declares no length), metadata is bounded
in bytes before it is parsed and in depth after (it is returned in every status poll and
webhook), and text that ends up in Postgres or in headers carries no control characters (a NUL
made Postgres refuse the row: a 500).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from uocr_core.errors import InvalidRequest, PayloadTooLarge

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # tab, newline, return allowed
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # none at all in names


async def read_limited(chunks: AsyncIterator[bytes], *, limit: int, declared: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes ``limit`` bytes (not after)."""
    if declared > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    received: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"request body exceeds the {limit}-byte limit")
        received.append(chunk)
    return b"".join(received)


def check_name(name: str, *, what: str = "file name") -> str:
    if _NAME_CONTROL.search(name):
        raise InvalidRequest(f"the {what} contains control characters (such as NUL)")
    return name


def check_text(value: str | None, *, what: str) -> str | None:
    if value is not None and _CONTROL.search(value):
        raise InvalidRequest(f"{what} contains control characters (such as NUL)")
    return value


def parse_metadata(raw: str, *, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """A form's metadata field: bounded in bytes before parsing, then checked as an object."""
    if len(raw.encode()) > max_bytes:
        raise InvalidRequest(f"metadata is larger than the {max_bytes}-byte limit")
    try:
        metadata = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        raise InvalidRequest("metadata must be a JSON object") from None
    if not isinstance(metadata, dict):
        raise InvalidRequest("metadata must be a JSON object")
    return check_metadata(metadata, max_bytes=max_bytes, max_depth=max_depth)


def check_metadata(metadata: dict[str, Any], *, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """Size, depth and control characters of metadata already parsed (a JSON submit's)."""
    _check_depth(metadata, max_depth)
    if len(json.dumps(metadata, ensure_ascii=False).encode()) > max_bytes:
        raise InvalidRequest(f"metadata is larger than the {max_bytes}-byte limit")
    return metadata


def _check_depth(root: object, max_depth: int) -> None:
    """Iterative, so a 100,000-deep value cannot exhaust the stack."""
    stack: list[tuple[object, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list) and depth > max_depth:
            raise InvalidRequest(f"metadata is nested deeper than {max_depth} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                check_text(key, what="a metadata key")
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            check_text(value, what="a metadata value")


def check_form_fields(form: Mapping[str, Any], known: frozenset[str]) -> None:
    """A multipart field the route does not take is refused, not ignored (a misspelled
    ``prioriy`` would otherwise submit a backlog job in silence)."""
    unknown = sorted(set(form.keys()) - known)
    if unknown:
        raise InvalidRequest(
            f"unknown form field {unknown[0][:50]!r}; this route takes: {', '.join(sorted(known))}",
            loc=("body", unknown[0][:50]),
        )
