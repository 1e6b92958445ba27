"""Vertical stripes that no box crosses over a run of lines: column gutters and table rules.

Both the column finder and the table finder look for the same thing: a stretch of lines whose
boxes all keep clear of some vertical stripe, with text on both sides of it on several lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from ocr_worker.engines.layout.lines import Line

# The detector splits a line into boxes only at gaps wider than a word space, so any stripe that
# stays clear down several lines is a layout feature. The narrowest real ones are gutters: a
# 10pt \columnsep beside 10pt text is ~0.7 of a line height of clear paper between the inks; a
# quarter leaves room for the deskewing's residual of a few pixels.
MIN_GUTTER = 0.25
# How far the detector's box reaches past the ink on each side, as a share of the box's height:
# stripes are measured between inks, so two columns whose padded boxes touch still part.
INK_PADDING = 0.15
# Three lines on each side: two side-by-side boxes, or a two-line caption, are not columns; the
# same stripe repeated on three lines on both sides is no accident.
MIN_COLUMN_LINES = 3


def run_end(lines: list[Line], start: int, left: float, right: float, unit: float) -> int:
    """How far a stripe starting at ``start`` keeps clear. Until one has text on both sides,
    any stripe will do (the first line of a column set may be a left column's heading); from
    then on, one with text on both sides must survive, so a run ends where full-width text
    crosses its gutter even if the ragged right margin stays clear."""
    clear = narrow([(left, right)], lines[start], unit)
    first, last = _centres(lines[start])
    end = start + 1
    while end < len(lines):
        after = narrow(clear, lines[end], unit)
        lo, hi = _centres(lines[end])
        lo, hi = min(lo, first), max(hi, last)
        if _interior(clear, first, last) and not _interior(after, lo, hi) or not after:
            break
        clear, first, last, end = after, lo, hi, end + 1
    return end


def _centres(line: Line) -> tuple[float, float]:
    return min(b.cx for b in line.boxes), max(b.cx for b in line.boxes)


def _interior(clear: list[tuple[float, float]], first: float, last: float) -> bool:
    """Some stripe has a box centre on either side (the leftmost and rightmost centres)."""
    return any(first < a and last > z for a, z in clear)


def stripes(
    lines: Sequence[Line], left: float, right: float, unit: float
) -> list[tuple[float, float]]:
    """Vertical stripes of the region's width that no box of these lines crosses."""
    clear = [(left, right)]
    for line in lines:
        clear = narrow(clear, line, unit)
    return clear


def narrow(clear: list[tuple[float, float]], line: Line, unit: float) -> list[tuple[float, float]]:
    """What stays of the stripes once this line's inks are laid across them."""
    for box in line.boxes:
        pad = min(INK_PADDING * box.height, (box.x2 - box.x1) / 2)  # a narrow "1" keeps a core
        ink = (box.x1 + pad, box.x2 - pad)
        pieces = []
        for a, z in clear:
            if ink[1] <= a or ink[0] >= z:
                pieces.append((a, z))
                continue
            pieces += [p for p in ((a, ink[0]), (ink[1], z)) if p[1] - p[0] >= MIN_GUTTER * unit]
        clear = pieces
    return clear


def gutters(lines: Sequence[Line], clear: list[tuple[float, float]]) -> list[float]:
    """The stripes with text on both sides on enough lines, as cut positions."""
    cuts = []
    for a, b in clear:
        lines_left = sum(any(box.cx < a for box in line.boxes) for line in lines)
        lines_right = sum(any(box.cx > b for box in line.boxes) for line in lines)
        if min(lines_left, lines_right) >= MIN_COLUMN_LINES:
            cuts.append((a + b) / 2)
    return cuts
