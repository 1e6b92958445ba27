"""Page furniture: running heads, running feet and page numbers, kept apart from the body.

A running head or foot is the first or last line of the page, set off from the body by a wider
gap than any the body has between its lines, and carrying the page number ("32", "xii", "- 7 -",
"Page 3 of 9") alone or at one end of a line of little ink ("Chapter 5. Managing Packages  32").
Read as body text they land mid-sentence when a paragraph runs across pages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.boxes import Placed
from ocr_worker.engines.layout.lines import Line, group_lines, line_pitch

# Body lines follow one another at one pitch and paragraph or section breaks add up to about one
# more; LaTeX's \headsep and \footskip put a running head or foot two to three pitches away.
FURNITURE_GAP = 1.8
# A running head's words cover well under the page's width ("Chapter 5. Managing Packages" and
# "32"); a footnote's line covers most of it.
FURNITURE_INK = 0.6
# A lone number needs only a break wider than the body's line pitch (a list's last "3" sits at
# one pitch).
LONE_NUMBER_GAP = 1.2
PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?[-\u2013\u2014]?\s*(\d{1,4}|[ivxlc]{1,7})\s*[-\u2013\u2014]?"
    r"(?:\s*(?:of|/)\s*\d{1,4})?$",
    re.IGNORECASE,
)


@dataclass
class Furniture:
    head: list[LayoutBlock]
    body: list[Placed]
    foot: list[LayoutBlock]


def split_furniture(boxes: Sequence[Placed]) -> Furniture:
    lines = group_lines(boxes)
    if len(lines) < 4:  # too little body to tell a head from a short page's text
        return Furniture([], list(boxes), [])
    pitch = line_pitch(lines)
    width = max(line.x2 for line in lines) - min(line.x1 for line in lines)
    head = _is_furniture(lines[0], lines[1], pitch, width)
    foot = _is_furniture(lines[-1], lines[-2], pitch, width)
    body = lines[int(head) : len(lines) - int(foot)]
    return Furniture(
        _blocks(lines[0], "header") if head else [],
        [box for line in body for box in line.boxes],
        _blocks(lines[-1], "footer") if foot else [],
    )


def _is_furniture(line: Line, neighbour: Line, pitch: float, width: float) -> bool:
    """Set off from the body and carrying the page number: alone, or at an end of a sparse line.

    Without the number a line at the top could as well be a section heading with space under
    it, and one at the foot a footnote or a listing's last line: both stay body text."""
    gap = abs(neighbour.cy - line.cy)
    if all(_number(box) for box in line.boxes):
        return gap >= LONE_NUMBER_GAP * pitch  # no heading looks like that, whatever its size
    ends = (line.boxes[0], line.boxes[-1])
    inked = sum(b.x2 - b.x1 for b in line.boxes)
    return (
        gap >= FURNITURE_GAP * pitch and any(map(_number, ends)) and inked < FURNITURE_INK * width
    )


def _number(box: Placed) -> bool:
    return bool(PAGE_NUMBER.match(box.text.strip()))


def _blocks(line: Line, label: str) -> list[LayoutBlock]:
    """The line's page number (if any) as its own block, the rest as one head/foot block."""
    numbers = [b for b in line.boxes if PAGE_NUMBER.match(b.text.strip())]
    words = [b for b in line.boxes if b not in numbers]
    blocks = []
    for part, part_label in ((words, label), (numbers, "page_number")):
        if part:
            blocks.append(LayoutBlock(part_label, [Line(part)]))
    first_is_number = bool(numbers) and numbers[0].x1 < (words[0].x1 if words else 0)
    return blocks[::-1] if first_is_number else blocks
