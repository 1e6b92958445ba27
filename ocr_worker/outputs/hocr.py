"""hOCR, the HTML OCR format that archives and tools (hocr-tools, the Internet Archive's
pipelines, PDF text-layer builders) read: every page in order, its blocks, lines and words,
each with its box in the rendered page's pixels.

Lines lie in bands of their block's box (``text_layer``); a word's box is its share of the
line's width by characters, which is what a search-and-highlight needs. A failed or canceled
page is still listed, empty, with a comment saying why: no page is dropped.
"""

from __future__ import annotations

from html import escape

from ocr_worker.outputs.text_layer import PlacedLine, placed_lines
from uocr_core.contracts import Block, PageResult

HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
<head>
<title>{title}</title>
<meta http-equiv="Content-Type" content="text/html; charset=utf-8"/>
<meta name="ocr-system" content="uocr"/>
<meta name="ocr-capabilities" content="ocr_page ocr_carea ocr_par ocr_line ocrx_word"/>
</head>
<body>
"""
TAIL = "</body>\n</html>\n"


def build_hocr(title: str, results: list[PageResult]) -> str:
    return head(title) + "".join(page(r) for r in results) + TAIL


def head(title: str) -> str:
    """The document's opening, before its pages (a long one is written page by page)."""
    return HEAD.format(title=escape(title))


def page(result: PageResult) -> str:
    n = result.page
    if result.status != "succeeded" or not (result.width and result.height):
        reason = f": {result.error}" if result.error else ""
        note = _comment(f"page {n} {result.status}{reason}")
        return f'<div class="ocr_page" id="page_{n}" title="ppageno {n - 1}">{note}</div>\n'
    size = (result.width, result.height)
    blocks = "".join(_block(n, k, b, size) for k, b in enumerate(result.blocks, 1))
    title = f"bbox 0 0 {result.width} {result.height}; ppageno {n - 1}"
    return f'<div class="ocr_page" id="page_{n}" title="{title}">\n{blocks}</div>\n'


def _block(n: int, k: int, block: Block, size: tuple[int, int]) -> str:
    lines = placed_lines(block, *size)
    if not lines:
        return ""
    box = _bbox(block.bbox)
    wconf = f"; x_wconf {round(block.confidence * 100)}" if block.confidence is not None else ""
    body = "".join(_line(f"{n}_{k}_{m}", line, wconf) for m, line in enumerate(lines, 1))
    return (
        f'<div class="ocr_carea" id="block_{n}_{k}" title="{box}">'
        f'<p class="ocr_par" id="par_{n}_{k}" title="{box}">\n{body}</p></div>\n'
    )


def _line(ident: str, line: PlacedLine, wconf: str) -> str:
    x1, y1, x2, y2 = line.bbox
    per_char = (x2 - x1) / max(len(line.text), 1)
    words, start = [], 0
    for m, word in enumerate(line.text.split(" "), 1):
        left = x1 + per_char * start
        right = left + per_char * len(word)
        start += len(word) + 1
        words.append(
            f'<span class="ocrx_word" id="word_{ident}_{m}" '
            f'title="{_bbox((left, y1, right, y2))}{wconf}">{escape(word)}</span>'
        )
    box = _bbox(line.bbox)
    return f'<span class="ocr_line" id="line_{ident}" title="{box}">{" ".join(words)}</span>\n'


def _comment(text: str) -> str:
    """An XML comment may hold no "--" and may not end with "-"."""
    while "--" in text:
        text = text.replace("--", "- -")
    return f"<!-- {text} -->"


def _bbox(box: tuple[float, float, float, float]) -> str:
    return "bbox " + " ".join(str(round(v)) for v in box)
