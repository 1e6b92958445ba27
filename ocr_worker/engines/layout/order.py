"""Reading order: column sets found where a real gutter runs, everything else line by line.

A page is read top to bottom, line by line, except where a run of lines shares a real gutter: a
vertical stripe that no box crosses over the whole run, with text on both sides on many lines,
splitting the run into columns of similar width. Such a run is read column by column, each column
again by these rules (a column may hold a table or a nested pair of columns).

Why not plain XY-cut: its fallback for a region without an empty horizontal stripe (any
paragraph: RapidOCR's line boxes touch) sorted by left edge, and it took any empty vertical stripe
for a gutter, so a table with a blank stripe was read column by column. Lines are the atoms here,
so a paragraph can only be read line after line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import median

from ocr_worker.engines.layout.boxes import Placed
from ocr_worker.engines.layout.lines import Line, group_lines, line_pitch
from ocr_worker.engines.layout.stripes import MIN_COLUMN_LINES, gutters, run_end

# Page columns are set to one width. Ragged short lines (an index) still fill most of their
# column; a table's columns are sized by their content (a label column is a fraction of its
# neighbour), so columns more than twice as wide as each other are a table, read row by row.
MAX_COLUMN_RATIO = 2.0
# A page column holds words: at least ~12 characters a line (about 6 line heights; the narrowest
# newspaper columns hold ~25). A narrower strip is a table column (an index's page numbers).
MIN_COLUMN_WIDTH = 6.0
# Columns span the text block (their outer margins are its margins, give or take a ragged last
# line); four fifths leaves room for a right column whose lines all end short.
COLUMN_FILL = 0.8
# The typical line of a text column spans most of it: a ragged-right line stops a word or two
# short (~15%), justified ones not at all; a table column's cells mostly do not.
LINE_FILL = 0.7


# A table whose last column wraps looks like two page columns (label cells | wrapped text, of
# similar widths, both filled). But its label side holds a line only where a row starts: fewer
# lines over the same height, each on a baseline of the other side, with gaps where a cell wraps.
# Page columns run on their own: one broken into paragraphs by blank lines can be as sparse, on
# the other's baselines, but then the other's lines run on full beside its breaks, where a wrapped
# cell's last line ends short.
SPARSE_LINES = 0.8  # the label side holds at most this share of the other side's lines
SAME_SPAN = 0.8  # ... over at least this share of its height
ALIGNED = 0.9  # ... this share of them on one of its baselines
MIN_WRAPS = 3  # ... with at least this many gaps where a cell wraps
# ... and most of its lines (this share) beside a line that follows a short one (ending before
# this share of the side's width): the last line of the cell above.
ROWS_AFTER_CELL_END = 0.5
CELL_END = 0.85


# Pages are set in at most four columns, each of which may hold one stripe of its own (an
# index's page numbers): a run cut by more stripes is a table, and is not searched for gutters.
MAX_COLUMNS = 4
MAX_STRIPES = 2 * MAX_COLUMNS - 1


@dataclass(frozen=True)
class Flow:
    """Lines read as one stream, in order: a column, or a stretch of the page read across."""

    lines: list[Line]


@dataclass(frozen=True)
class _Run:
    start: int
    end: int  # exclusive
    cuts: list[float]  # x of each gutter, left to right


def reading_order(boxes: Sequence[Placed]) -> list[Flow]:
    if not boxes:
        return []
    unit = median(b.height for b in boxes)
    return _order(list(boxes), unit)


def _order(boxes: list[Placed], unit: float) -> list[Flow]:
    lines = group_lines(boxes)
    run = _column_run(lines, unit)
    if run is None:
        return [Flow(lines)]
    flows = _order(_boxes(lines[: run.start]), unit) if run.start else []
    for column in _split(_boxes(lines[run.start : run.end]), run.cuts):
        flows += _order(column, unit)
    if run.end < len(lines):
        flows += _order(_boxes(lines[run.end :]), unit)
    return flows


def _column_run(lines: list[Line], unit: float) -> _Run | None:
    """The first run of lines (top down) that has real gutters."""
    if len(lines) < MIN_COLUMN_LINES:
        return None
    left, right = min(line.x1 for line in lines), max(line.x2 for line in lines)
    start = 0
    while start <= len(lines) - MIN_COLUMN_LINES:
        end, clear = run_end(lines, start, left, right, unit)
        cuts = gutters(lines[start:end], clear)
        run = _boxes(lines[start:end])
        if _table(run, cuts):  # the table finder reads it; no page columns start inside it
            start = end
            continue
        columns = _page_columns(run, cuts, unit) if _fills(run, left, right) else []
        if columns:
            return _Run(start, end, columns)
        start += 1
    return None


def _fills(boxes: list[Placed], left: float, right: float) -> bool:
    """Page columns fill the width of the text they sit in; an indented table or program output
    inside a column of text does not."""
    return max(b.x2 for b in boxes) - min(b.x1 for b in boxes) >= COLUMN_FILL * (right - left)


def _page_columns(boxes: list[Placed], cuts: list[float], unit: float) -> list[float]:
    """The gutters among ``cuts`` that split the page into columns, or [] if none do.

    Not every clear stripe is a gutter: in a two-column index each column has its own stripe
    between entries and page numbers. Page columns are alike, so the chosen gutters must leave
    columns of similar width holding the same number of the other stripes; a table's stripes
    leave unlike parts (a narrow label column beside a wide one). The most columns win."""
    best: list[float] = []
    if len(cuts) > MAX_STRIPES:
        return best
    for size in range(1, min(len(cuts), MAX_COLUMNS - 1) + 1):
        for chosen in combinations(cuts, size):
            columns = _split(boxes, list(chosen))
            if _alike(columns, [c for c in cuts if c not in chosen], unit):
                best = list(chosen)
    return best


def _alike(columns: list[list[Placed]], others: list[float], unit: float) -> bool:
    widths = [max(b.x2 for b in col) - min(b.x1 for b in col) for col in columns]
    inner = [
        sum(min(b.x1 for b in col) < cut < max(b.x2 for b in col) for cut in others)
        for col in columns
    ]
    return (
        len(columns) >= 2
        and max(widths) <= MAX_COLUMN_RATIO * min(widths)
        and min(widths) >= MIN_COLUMN_WIDTH * unit
        and len(set(inner)) == 1
        and all(_filled(col) for col in columns)
    )


def _table(boxes: list[Placed], cuts: list[float]) -> bool:
    """Some stripe has a table's row heads on one side, its wrapped cells on the other. Each
    side is taken whole: a column with a few cells missing (glyphs the detector skipped) is not
    sparse when its neighbours hold a line on every row."""
    return any(_row_heads(*_split(boxes, [cut])) for cut in cuts)


def _row_heads(left: list[Placed], right: list[Placed]) -> bool:
    """One side holds the row heads of a table whose other side wraps (see SPARSE_LINES)."""
    sparse, dense = sorted((group_lines(left), group_lines(right)), key=len)
    if len(sparse) < MIN_COLUMN_LINES or len(sparse) > SPARSE_LINES * len(dense):
        return False
    if sparse[-1].cy - sparse[0].cy < SAME_SPAN * (dense[-1].cy - dense[0].cy):
        return False
    beside = [_beside(line, dense) for line in sparse]
    pitch = line_pitch(dense)
    wraps = sum(b.cy - a.cy > 1.5 * pitch for a, b in zip(sparse, sparse[1:], strict=False))
    if sum(n is not None for n in beside) < ALIGNED * len(sparse) or wraps < MIN_WRAPS:
        return False
    # A row head stands beside a cell's first line, so the line above that is a cell's last:
    # short, most rows. Beside a column of text broken into paragraphs by blank lines, the
    # other column's lines run on, full, across those breaks.
    edge = min(line.x1 for line in dense)
    width = max(line.x2 for line in dense) - edge
    above = [dense[n - 1] for n in beside[1:] if n]
    short = sum(line.x2 - edge < CELL_END * width for line in above)
    return short >= ROWS_AFTER_CELL_END * len(above)


def _beside(line: Line, others: list[Line]) -> int | None:
    """The index of the line of ``others`` on ``line``'s baseline, if any."""
    return next(
        (n for n, other in enumerate(others) if abs(line.cy - other.cy) <= line.height / 2),
        None,
    )


def _filled(column: list[Placed]) -> bool:
    """Running text reaches across its column on most lines (justified, or ragged by a word);
    a table's cells are as long as their content ("a+b" beside "Binary addition")."""
    lines = group_lines(column)
    left, right = min(b.x1 for b in column), max(b.x2 for b in column)
    reach = median((line.x2 - line.x1) / max(right - left, 1e-6) for line in lines)
    return reach >= LINE_FILL


def _split(boxes: list[Placed], cuts: list[float]) -> list[list[Placed]]:
    columns: list[list[Placed]] = [[] for _ in range(len(cuts) + 1)]
    for box in boxes:
        columns[sum(box.cx > cut for cut in cuts)].append(box)
    return [col for col in columns if col]


def _boxes(lines: Sequence[Line]) -> list[Placed]:
    return [box for line in lines for box in line.boxes]
