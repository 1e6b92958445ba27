"""Idempotency keys derived from what is submitted: re-running a submit after a crash or a
Ctrl-C sends the same key for the same file and options, so nothing is submitted twice."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def content_key(digest: str, options: dict[str, Any]) -> str:
    """``uocr-<hex>`` over the document's sha256 and the options it is submitted with."""
    canonical = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return "uocr-" + hashlib.sha256(f"{digest}|{canonical}".encode()).hexdigest()[:48]
