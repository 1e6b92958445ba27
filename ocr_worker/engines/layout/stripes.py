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
# How far a box may reach into the columns on either side of a gutter and still be taken for
# two words run together across it: under three line heights, about six characters.
BRIDGE_REACH = 3.0

# A line of cells the detector ran together starts inside the table, at a column's left edge:
# further in than a paragraph's first-line indent or a ragged caption (about two line heights).
MERGED_INSET = 4.0

Stripe = tuple[float, float]  # x1, x2 of a vertical stripe


def run_end(
    lines: list[Line], start: int, left: float, right: float, unit: float
) -> tuple[int, list[Stripe]]:
    """How far a stripe starting at ``start`` keeps clear, and the stripes left clear there.

    Until one has text on both sides, any stripe will do (the first line of a column set may be
    a left column's heading); from then on, one with text on both sides must survive, so a run
    ends where full-width text crosses its gutter even if the ragged right margin stays clear.
    A line whose only crossing is a short box bridging the gutter does not end it."""
    clear = narrow([(left, right)], lines[start], unit)
    first, last = _centres(lines[start])
    end = start + 1
    while end < len(lines):
        after: list[Stripe] | None = narrow(clear, lines[end], unit)
        lo, hi = _centres(lines[end])
        lo, hi = min(lo, first), max(hi, last)
        if _interior(clear, first, last) and not _interior(after or [], lo, hi):
            after = _bridged(clear, lines[end], unit, (lo, hi)) or _merged_cells(
                clear, lines, start, end, unit, (first, last)
            )
        elif after and _crosses_gutters(lines[start:end], clear, after):
            after = _merged_cells(clear, lines, start, end, unit, (first, last))
        if not after:
            break
        clear, first, last, end = after, lo, hi, end + 1
    return end, clear


def _bridged(
    clear: list[Stripe], line: Line, unit: float, centres: tuple[float, float]
) -> list[Stripe] | None:
    """The stripes as if the line's short crossing boxes were not there, or None.

    The recognizer runs two words together across a narrow gutter ("94" + "v3.2.9" read as one
    box); such a box reaches under BRIDGE_REACH line heights into each side, and its line has
    other boxes. A heading or a line of text across the columns reaches much further."""
    crossing = [b for b in line.boxes if any(b.x1 < a and b.x2 > z for a, z in clear)]
    short = all(
        any(b.x1 >= a - BRIDGE_REACH * unit and b.x2 <= z + BRIDGE_REACH * unit for a, z in clear)
        for b in crossing
    )
    rest = [b for b in line.boxes if b not in crossing]
    if not crossing or not short or not rest:
        return None
    after = narrow(clear, Line(rest), unit)
    return after if _interior(after, *centres) else None


def _crosses_gutters(run: list[Line], clear: list[Stripe], after: list[Stripe]) -> bool:
    """A line laid across two or more of the run's gutters (stripes with text on both sides on
    several lines) is no part of it, even where a stripe at the edge survives it: a table's
    caption below it, a paragraph under a page of columns."""
    if len(after) > len(clear) - 2:
        return False
    return sum(not any(a < cut < z for a, z in after) for cut in gutters(run, clear)) >= 2


def _merged_cells(
    clear: list[Stripe],
    lines: list[Line],
    start: int,
    end: int,
    unit: float,
    centres: tuple[float, float],
) -> list[Stripe] | None:
    """The stripes kept across a line of wrapped cells that the detector ran together.

    ``lines[start:end]``: the run so far; ``lines[end]`` crosses. Where two columns
    of a table both wrap on the same line, the detector may box both cells' last words as one
    ("list" + "information.": the type and description columns). Such a line starts inside the
    table, well right of where its rows start (a line of text or a caption below the table
    starts at its left edge, or near it), and the line after it keeps the stripes clear again."""
    if end + 1 >= len(lines):
        return None
    if lines[end].x1 - min(line.x1 for line in lines[start:end]) < MERGED_INSET * unit:
        return None
    return clear if _interior(narrow(clear, lines[end + 1], unit), *centres) else None


def _centres(line: Line) -> tuple[float, float]:
    return min(b.cx for b in line.boxes), max(b.cx for b in line.boxes)


def _interior(clear: list[Stripe], first: float, last: float) -> bool:
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
