"""The document's text formats (JSON, Markdown, text, JSON lines, hOCR, ALTO, chunks) written
page by page to files as the results stream in: memory stays that of one page, whatever the
document's length. The searchable PDF reads its text layer back from the JSON lines file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from ocr_worker.outputs import alto, hocr
from uocr_core.contracts import PageResult
from uocr_core.results import markdown
from uocr_core.results.chunks import ChunkWriter

TEXT_FORMATS = ("json", "markdown", "text", "jsonl", "hocr", "alto", "chunks")


def write_text_formats(
    folder: Path, head: dict[str, Any], results: Iterable[PageResult]
) -> dict[str, Path]:
    """Each format's file in ``folder``, by format name. ``head``: the document's own fields of
    result.json (its pages follow them); its ``source`` titles the hOCR."""
    paths = {fmt: folder / f"result.{fmt}" for fmt in TEXT_FORMATS}
    with ExitStack() as stack:
        files: dict[str, TextIO] = {
            fmt: stack.enter_context(path.open("w", encoding="utf-8"))
            for fmt, path in paths.items()
        }
        opening = json.dumps(head, ensure_ascii=False, indent=1)
        files["json"].write(opening[: opening.rindex("}")].rstrip() + ',\n "pages": [')
        files["hocr"].write(hocr.head(head["source"]))
        files["alto"].write(alto.head(head))
        chunks = ChunkWriter(files["chunks"])
        markdown_chars = 0  # the chunks give their place in result.md by character
        for n, result in enumerate(results):
            markdown_chars = _write_page(files, result, chunks, markdown_chars, first=n == 0)
        chunks.close()
        files["json"].write("\n ]\n}")
        files["markdown"].write("\n")
        files["text"].write("\n")
        files["hocr"].write(hocr.TAIL)
        files["alto"].write(alto.TAIL)
    return paths


def _write_page(
    files: dict[str, TextIO], result: PageResult, chunks: ChunkWriter, at: int, *, first: bool
) -> int:
    """Writes the page to every format; ``at``: result.md's length so far, returned updated."""
    line = json.dumps(result.to_jsonl_obj(), ensure_ascii=False)
    files["json"].write(("\n  " if first else ",\n  ") + line)
    files["jsonl"].write(line + "\n")
    marker, body = markdown.page_parts(result, first=first)
    files["markdown"].write(marker + body)
    chunks.page(result, body, at + len(marker))
    # A form feed between pages' text, as pdftotext does.
    files["text"].write(("" if first else "\n\f") + result.text)
    files["hocr"].write(hocr.page(result))
    files["alto"].write(alto.page(result))
    return at + len(marker) + len(body)
