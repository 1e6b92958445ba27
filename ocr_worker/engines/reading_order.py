"""Reading order for detected text boxes: recursive XY-cut, then lines, then paragraphs.

Why XY-cut: line-by-line sorting reads two-column pages straight across the gutter. Splitting
first at large horizontal gaps (section breaks, full-width headings), then at column gutters,
then line by line, keeps columns whole and still reads side-by-side words left to right.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True)
class TextBox:
    x1: float
    y1: float
    x2: float
    y2: float
    text: str
    score: float = 1.0

    @property
    def height(self) -> float:
        return self.y2 - self.y1


@dataclass(frozen=True)
class Paragraph:
    lines: list[list[TextBox]]

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        boxes = [box for line in self.lines for box in line]
        return (
            min(b.x1 for b in boxes),
            min(b.y1 for b in boxes),
            max(b.x2 for b in boxes),
            max(b.y2 for b in boxes),
        )

    @property
    def line_texts(self) -> list[str]:
        return [" ".join(box.text for box in line) for line in self.lines]


def order_boxes(boxes: list[TextBox]) -> list[TextBox]:
    if not boxes:
        return []
    line_height = median(box.height for box in boxes)
    return _xy_cut(boxes, line_height)


def _xy_cut(boxes: list[TextBox], line_height: float) -> list[TextBox]:
    if len(boxes) <= 1:
        return list(boxes)
    y_gap = _widest_gap(boxes, lambda b: (b.y1, b.y2))
    x_gap = _widest_gap(boxes, lambda b: (b.x1, b.x2))
    if y_gap and y_gap[1] >= 1.5 * line_height:  # a section break spans every column
        cut, by = y_gap[0], lambda b: b.y1
    elif x_gap and x_gap[1] >= line_height:  # a column gutter
        cut, by = x_gap[0], lambda b: b.x1
    elif y_gap:  # the gap between two lines
        cut, by = y_gap[0], lambda b: b.y1
    else:  # one line whose words touch: left to right
        return sorted(boxes, key=lambda b: b.x1)
    first = [b for b in boxes if by(b) < cut]
    second = [b for b in boxes if by(b) >= cut]
    return _xy_cut(first, line_height) + _xy_cut(second, line_height)


def _widest_gap(boxes: list[TextBox], span) -> tuple[float, float] | None:  # type: ignore[no-untyped-def]
    """(position, width) of the widest empty stripe between boxes along one axis, or None."""
    intervals = sorted(span(b) for b in boxes)
    best: tuple[float, float] | None = None
    reach = intervals[0][1]
    for start, end in intervals[1:]:
        if start > reach and (best is None or start - reach > best[1]):
            best = ((reach + start) / 2, start - reach)
        reach = max(reach, end)
    return best


def group_paragraphs(ordered: list[TextBox]) -> list[Paragraph]:
    """Consecutive boxes on one baseline form a line; close, aligned lines form a paragraph."""
    if not ordered:
        return []
    line_height = median(box.height for box in ordered)
    lines: list[list[TextBox]] = []
    for box in ordered:
        if lines and _same_line(lines[-1][-1], box):
            lines[-1].append(box)
        else:
            lines.append([box])
    paragraphs: list[list[list[TextBox]]] = []
    for line in lines:
        if paragraphs and _continues(paragraphs[-1][-1], line, line_height):
            paragraphs[-1].append(line)
        else:
            paragraphs.append([line])
    return [Paragraph(lines=p) for p in paragraphs]


def _same_line(a: TextBox, b: TextBox) -> bool:
    overlap = min(a.y2, b.y2) - max(a.y1, b.y1)
    return b.x1 >= a.x1 and overlap > 0.5 * min(a.height, b.height)


def _continues(previous: list[TextBox], line: list[TextBox], line_height: float) -> bool:
    gap = min(b.y1 for b in line) - max(b.y2 for b in previous)
    left_aligned = abs(min(b.x1 for b in line) - min(b.x1 for b in previous)) < 2 * line_height
    similar_size = _line_height(line) < 1.3 * _line_height(previous) and _line_height(
        previous
    ) < 1.3 * _line_height(line)
    return 0 <= gap <= 0.8 * line_height and left_aligned and similar_size


def _line_height(line: list[TextBox]) -> float:
    return max(b.y2 for b in line) - min(b.y1 for b in line)
