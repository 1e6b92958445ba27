"""Boxes on one baseline form a line, read left to right.

On the deskewed page a box belongs to a line when it shares most of its height with it. RapidOCR's
boxes of neighbouring lines touch or overlap a little (its boxes are grown around the ink), so
"overlaps at all" would chain a whole paragraph into one line; half the smaller height does not:
two lines overlap by far less, two boxes of one line by far more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from ocr_worker.engines.layout.boxes import Placed, Rect, union_bounds
from ocr_worker.engines.layout.spacing import join, tidy

SAME_LINE_OVERLAP = 0.5  # of the smaller height, see above


@dataclass
class Line:
    """Boxes of one line on the deskewed page, left to right."""

    boxes: list[Placed] = field(default_factory=list)

    @property
    def x1(self) -> float:
        return min(b.x1 for b in self.boxes)

    @property
    def x2(self) -> float:
        return max(b.x2 for b in self.boxes)

    @property
    def y1(self) -> float:
        return min(b.y1 for b in self.boxes)

    @property
    def y2(self) -> float:
        return max(b.y2 for b in self.boxes)

    @property
    def cy(self) -> float:
        return median(b.cy for b in self.boxes)

    @property
    def height(self) -> float:
        """The text's size: the tallest box (a short box such as "a," is shorter than its line)."""
        return max(b.height for b in self.boxes)

    @property
    def text(self) -> str:
        return join([tidy(b.text) for b in self.boxes])

    @property
    def page_bounds(self) -> Rect:
        return union_bounds([b.box for b in self.boxes])

    def overlap(self, box: Placed) -> float:
        """Shared height with ``box`` over the smaller of the two heights."""
        shared = min(self.y2, box.y2) - max(self.y1, box.y1)
        return shared / max(1e-6, min(self.height, box.height))


def group_lines(boxes: Sequence[Placed]) -> list[Line]:
    """Lines top to bottom, each left to right."""
    lines: list[Line] = []
    for box in sorted(boxes, key=lambda b: b.cy):
        best = max(
            (line for line in lines[-4:] if not _collides(line, box)),
            key=lambda line: line.overlap(box),
            default=None,
        )
        if best is not None and best.overlap(box) >= SAME_LINE_OVERLAP:
            best.boxes.append(box)
        else:
            lines.append(Line([box]))
    for line in lines:
        line.boxes.sort(key=lambda b: b.x1)
    return sorted(lines, key=lambda line: line.cy)


def _collides(line: Line, box: Placed) -> bool:
    """Two boxes that cover the same stretch of a line are on different lines."""
    for other in line.boxes:
        shared = min(other.x2, box.x2) - max(other.x1, box.x1)
        if shared > 0.5 * min(other.x2 - other.x1, box.x2 - box.x1):
            return True
    return False


def line_pitch(lines: Sequence[Line]) -> float:
    """The usual distance between consecutive baselines (the median, so headings and paragraph
    breaks do not count); the median height when there are too few lines."""
    steps = [b.cy - a.cy for a, b in zip(lines, lines[1:], strict=False) if b.cy > a.cy]
    if len(steps) >= 2:
        return median(steps)
    return median(line.height for line in lines) * 1.2 if lines else 0.0
