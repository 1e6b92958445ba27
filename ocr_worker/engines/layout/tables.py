"""Tables: runs of lines whose cells keep clear of the same vertical stripes, read row by row.

The reading order reads a stretch with stripes that are no page gutter across, line by line; here
such a stretch becomes a table whose columns are the spaces between the stripes. A cell that wraps
(its row's first cell empty, right under the row) continues that row's cells.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.boxes import Placed
from ocr_worker.engines.layout.lines import Line
from ocr_worker.engines.layout.spacing import join, tidy
from ocr_worker.engines.layout.stripes import MIN_COLUMN_LINES, gutters, run_end

# A bullet or an item number the detector boxed apart from its item: a list, not a table column.
LIST_MARKER = re.compile(r"^([\u2022\u00b7\u25aa\u25e6\u2013*+-]|\(?\d{1,3}[.)]|\(?[a-z][.)])$")


# A row's first cell starts at the table's left edge; a wrapped cell's line further in than a
# ragged start (a couple of characters) is not a new row.
ROW_HEAD_INSET = 2.0


@dataclass(frozen=True)
class TableSpan:
    start: int
    end: int  # exclusive
    cuts: list[float]


def find_tables(lines: Sequence[Line], unit: float) -> list[TableSpan]:
    if len(lines) < MIN_COLUMN_LINES:
        return []
    left, right = min(line.x1 for line in lines), max(line.x2 for line in lines)
    spans, start = [], 0
    while start <= len(lines) - MIN_COLUMN_LINES:
        end, clear = run_end(list(lines), start, left, right, unit)
        cuts = gutters(lines[start:end], clear)
        if cuts:
            first = _first_row(lines, start, end, cuts)
            if not _is_list(lines[first:end], cuts[0]) and not _is_listing(
                lines[first:end], cuts[0]
            ):
                spans.append(TableSpan(first, end, cuts))
            start = end
        else:
            start += 1
    return spans


def table_block(lines: Sequence[Line], cuts: list[float]) -> LayoutBlock:
    rows: list[list[str]] = []
    left = min(line.x1 for line in lines)
    for n, line in enumerate(lines):
        cells = _cells(line, cuts)
        if (
            rows
            and _continues(lines[n - 1], line)
            and _no_row_head(cells, line, lines[n - 1], left)
        ):
            rows[-1] = [join([a, b]) for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return LayoutBlock("table", list(lines), rows=rows)


def _cells(line: Line, cuts: list[float]) -> list[str]:
    parts: list[list[str]] = [[] for _ in range(len(cuts) + 1)]
    for box in line.boxes:
        for text, cx in _words_placed(box, cuts):
            parts[sum(cx > cut for cut in cuts)].append(tidy(text))
    return [join(part) for part in parts]


def _words_placed(box: Placed, cuts: list[float]) -> list[tuple[str, float]]:
    """The box's text at its centre; a box across a cut (two cells the detector ran together),
    word by word, each at its share of the box's length by characters."""
    if not any(box.x1 < cut < box.x2 for cut in cuts) or " " not in box.text.strip():
        return [(box.text, box.cx)]
    per_char = (box.x2 - box.x1) / max(len(box.text), 1)
    placed = []
    for word in re.finditer(r"\S+", box.text):
        placed.append((word.group(), box.x1 + per_char * (word.start() + word.end()) / 2))
    return placed


def _no_row_head(cells: list[str], line: Line, above: Line, left: float) -> bool:
    """Nothing where a row's first cell starts: an empty first column, or text well inside it
    in fewer boxes than the row above (a wrapped cell of a column the stripes did not part
    from the first). A line as full as the one above is a row of its own, however far in it
    starts ("Female" under "Admitted Male")."""
    if not cells[0]:
        return True
    inset = line.x1 - left > ROW_HEAD_INSET * line.height
    return inset and len(line.boxes) < len(above.boxes)


def _continues(above: Line, line: Line) -> bool:
    """Right under the row above (no more than a line's pitch apart)."""
    return line.cy - above.cy <= 1.5 * max(above.height, line.height)


def _first_row(lines: Sequence[Line], start: int, end: int, cuts: list[float]) -> int:
    """Lines at the top of the run with nothing right of the first stripe are text before the
    table (its caption, an introducing sentence), not rows."""
    while start < end - 1 and all(box.cx < cuts[0] for box in lines[start].boxes):
        start += 1
    return start


def _is_listing(lines: Sequence[Line], cut: float) -> bool:
    """Line numbers left of the first stripe, counting up: a numbered program listing, whose
    indentation leaves clear stripes, not a table."""
    firsts = [" ".join(b.text for b in line.boxes if b.cx < cut).strip() for line in lines]
    numbers = [int(text) for text in firsts if text.isdigit()]
    return len(numbers) == len(firsts) and numbers == sorted(numbers)


def _is_list(lines: Sequence[Line], cut: float) -> bool:
    firsts = [" ".join(b.text for b in line.boxes if b.cx < cut).strip() for line in lines]
    return all(not text or LIST_MARKER.match(text) for text in firsts)
