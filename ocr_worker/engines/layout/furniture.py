"""Page furniture: running heads, running feet and page numbers, kept apart from the body.

A running head or foot is the first or last line of the page, set off from the body by a wider
gap than any the body has between its lines, and no larger than body text (a chapter title at the
top of a page is larger). A page number is a number alone in such a line ("32", "xii", "- 7 -",
"Page 3 of 9"). Read as body text they land mid-sentence when a paragraph runs across pages.
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
# A running head is set at body size or smaller; 10% over allows for the detector's padding.
FURNITURE_MAX_HEIGHT = 1.1
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


def split_furniture(boxes: Sequence[Placed], body_height: float) -> Furniture:
    lines = group_lines(boxes)
    if len(lines) < 4:  # too little body to tell a head from a short page's text
        return Furniture([], list(boxes), [])
    pitch = line_pitch(lines)
    width = max(line.x2 for line in lines) - min(line.x1 for line in lines)
    head = _is_furniture(lines[0], lines[1], pitch, body_height) and _sparse(lines[0], width)
    # The foot of a page also holds footnotes, a listing's last line or a closing remark after
    # a break; a running foot carries the page number.
    foot = _is_furniture(lines[-1], lines[-2], pitch, body_height) and _sparse(lines[-1], width)
    foot = foot and any(PAGE_NUMBER.match(b.text.strip()) for b in lines[-1].boxes)
    body = lines[int(head) : len(lines) - int(foot)]
    return Furniture(
        _blocks(lines[0], "header") if head else [],
        [box for line in body for box in line.boxes],
        _blocks(lines[-1], "footer") if foot else [],
    )


def _is_furniture(line: Line, neighbour: Line, pitch: float, body_height: float) -> bool:
    gap = abs(neighbour.cy - line.cy)
    if all(PAGE_NUMBER.match(box.text.strip()) for box in line.boxes):
        # A number alone: no heading looks like that, whatever its size; any break will do.
        return gap >= LONE_NUMBER_GAP * pitch
    if gap < FURNITURE_GAP * pitch:
        return False
    # A title at the top of a page is larger than body text, but it does not end in a number
    # boxed apart from it, as "Chapter 5. Managing Packages    32" does.
    ends = (line.boxes[0], line.boxes[-1])
    numbered = len(line.boxes) > 1 and any(PAGE_NUMBER.match(b.text.strip()) for b in ends)
    return numbered or line.height <= FURNITURE_MAX_HEIGHT * body_height


def _sparse(line: Line, width: float) -> bool:
    """A running head or foot is a title and a number at the margins: little ink across the
    page. A one-line footnote below its rule runs across it, and stays body text."""
    return sum(b.x2 - b.x1 for b in line.boxes) < FURNITURE_INK * width


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
