"""Chunks at the size a caller asks for: the stored page results cut again (uocr_core/results),
in characters or in the tokens of a tokenizer the deployment lists (``chunk_tokenizers``)."""

from __future__ import annotations

import io
import json

from uocr_core.contracts import PageResult
from uocr_core.errors import InvalidRequest
from uocr_core.results import measure
from uocr_core.results.chunks import write_chunks
from uocr_core.settings import Settings


def asked(
    fmt: str,
    max_chars: int | None,
    max_tokens: int | None,
    tokenizer: str | None,
    settings: Settings,
) -> measure.Measure | None:
    """The size asked for, or None for the chunks written at assembly; a 422 for a size with
    another format, both sizes at once, or tokens without their tokenizer."""
    if max_chars is None and max_tokens is None and tokenizer is None:
        return None
    if fmt != "chunks":
        raise InvalidRequest(f"max_chars, max_tokens and tokenizer size chunks, not {fmt}")
    if max_chars is not None and (max_tokens is not None or tokenizer is not None):
        raise InvalidRequest("give max_chars, or max_tokens with a tokenizer: not both")
    if max_chars is not None:
        return measure.Chars(max_chars)
    if max_tokens is None or tokenizer is None:
        raise InvalidRequest("max_tokens and tokenizer go together: whose tokens, how many")
    return measure.tokens(max_tokens, tokenizer, dict(settings.chunk_tokenizers))


def rechunked(pages_jsonl: bytes, size: measure.Measure) -> bytes:
    """The document's chunks at ``size``, from its pages.jsonl."""
    out = io.StringIO()
    # Lines end at "\n" only: a page's text may hold U+2028 and the like, written raw
    # (ensure_ascii=False), which str.splitlines would cut a JSON line at.
    pages = (
        PageResult.model_validate(json.loads(line))
        for line in pages_jsonl.split(b"\n")
        if line.strip()
    )
    write_chunks(pages, out, size)
    return out.getvalue().encode()
