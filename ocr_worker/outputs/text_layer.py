"""Where each line of a page's text lies: what the searchable PDF and hOCR lay over the scan.

Engines give a box per block, not per line, so a block's lines share its box in equal bands,
top to bottom; a table (HTML from the GPU engine) is one line per row, its cells separated by
spaces. Boxes are in the rendered page's pixels, as the engines give them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from uocr_core.contracts import Block, PageResult

TABLE_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S | re.I)
TABLE_CELL = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PlacedLine:
    text: str
    bbox: Box  # x1, y1, x2, y2 in page pixels


def page_lines(result: PageResult) -> list[PlacedLine]:
    """Every line of a read page in reading order, placed on the page (none if unsized)."""
    if not (result.width and result.height):
        return []
    return [
        line for block in result.blocks for line in placed_lines(block, result.width, result.height)
    ]


def placed_lines(block: Block, width: float, height: float) -> list[PlacedLine]:
    """The block's lines in equal bands of its box (clipped to the page), top to bottom."""
    lines = plain_lines(block.text)
    x1, y1, x2, y2 = block.bbox
    x1, y1, x2, y2 = max(x1, 0.0), max(y1, 0.0), min(x2, width), min(y2, height)
    if not lines or x2 <= x1 or y2 <= y1:
        return []
    band = (y2 - y1) / len(lines)
    return [
        PlacedLine(line, (x1, y1 + band * n, x2, y1 + band * (n + 1)))
        for n, line in enumerate(lines)
    ]


def plain_lines(text: str) -> list[str]:
    """What a reader searches for: a table as one line per row with its markup gone, other
    text line by line as read (a literal "<" in it stays); no empty lines."""
    rows = TABLE_ROW.findall(text)
    if rows:
        cells = [[_plain(cell) for cell in TABLE_CELL.findall(row)] for row in rows]
        lines = [" ".join(c for c in row if c) for row in cells]
    else:
        lines = [" ".join(line.split()) for line in text.split("\n")]
    return [line for line in lines if line]


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(TAG.sub(" ", fragment)).split())
