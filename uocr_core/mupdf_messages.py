"""MuPDF writes its errors and warnings ("format error: non-page object in page tree") straight
to stderr, breaking the one-JSON-object-per-line logs. Every process that opens documents turns
that off and logs what MuPDF said as one structured line instead."""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def keep_mupdf_quiet() -> None:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)


def log_mupdf_messages(**context: Any) -> None:
    """What MuPDF said since the last call, as one log line (nothing when it said nothing)."""
    import pymupdf

    messages = pymupdf.TOOLS.mupdf_warnings(reset=True)
    if messages:
        log.warning("mupdf.messages", messages=messages.splitlines()[:50], **context)
