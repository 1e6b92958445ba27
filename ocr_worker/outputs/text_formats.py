"""The document's text formats (JSON, Markdown, text, JSON lines, hOCR, ALTO) written page by
page to files as the results stream in: memory stays that of one page, whatever the document's
length. The searchable PDF reads its text layer back from the JSON lines file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from ocr_worker.outputs import alto, hocr
from uocr_core.contracts import PageResult

TEXT_FORMATS = ("json", "markdown", "text", "jsonl", "hocr", "alto")


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
        for n, result in enumerate(results):
            _write_page(files, result, first=n == 0)
        files["json"].write("\n ]\n}")
        files["markdown"].write("\n")
        files["text"].write("\n")
        files["hocr"].write(hocr.TAIL)
        files["alto"].write(alto.TAIL)
    return paths


def _write_page(files: dict[str, TextIO], result: PageResult, *, first: bool) -> None:
    line = json.dumps(result.to_jsonl_obj(), ensure_ascii=False)
    files["json"].write(("\n  " if first else ",\n  ") + line)
    files["jsonl"].write(line + "\n")
    body = (
        result.markdown
        if result.status == "succeeded"
        else f"> page {result.page} {result.status}: {result.error or ''}"
    )
    files["markdown"].write(("" if first else "\n\n") + f"<!-- page {result.page} -->\n\n{body}")
    # A form feed between pages' text, as pdftotext does.
    files["text"].write(("" if first else "\n\f") + result.text)
    files["hocr"].write(hocr.page(result))
    files["alto"].write(alto.page(result))
