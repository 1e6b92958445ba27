"""One page's detections to labelled blocks in reading order: the layout's single entry point.

Upright the page (skew from the detector's quads), set its running head and foot aside, order the
body (columns where a real gutter runs, line by line elsewhere), then cut each flow into blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.boxes import Placed, TextBox
from ocr_worker.engines.layout.furniture import split_furniture
from ocr_worker.engines.layout.order import reading_order
from ocr_worker.engines.layout.paragraphs import flow_blocks
from ocr_worker.engines.layout.skew import upright


def layout_page(boxes: Sequence[TextBox], *, width: float, height: float) -> list[LayoutBlock]:
    kept = [box for box in boxes if box.text.strip()]
    if not kept:
        return []
    placed = upright(kept, width, height)
    body_height = _body_height(placed)
    page = split_furniture(placed)
    unit = median(b.height for b in page.body) if page.body else body_height
    blocks = list(page.head)
    for flow in reading_order(page.body):
        blocks += flow_blocks(flow.lines, unit, body_height)
    return blocks + page.foot


def _body_height(placed: list[Placed]) -> float:
    """The body text's line height: the median over boxes weighted by their length on the page
    (not their characters: a line of Chinese holds half the characters of a Latin one), so many
    short labels or a few large headings do not move it."""
    weighted = sorted((b.height, b.x2 - b.x1) for b in placed)
    half, seen = sum(n for _, n in weighted) / 2, 0.0
    for size, count in weighted:
        seen += count
        if seen >= half:
            return size
    return weighted[-1][0]
