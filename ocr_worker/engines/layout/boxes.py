"""A detected line of text with its true geometry, and the same box seen on a deskewed page.

RapidOCR's detector returns a quadrilateral per line (top-left, top-right, bottom-right,
bottom-left). Its axis-aligned bounds grow with the tilt (a 1500 px line tilted 0.7 degrees is
18 px taller than its text), so sizes are measured on the quad itself: its length along the
baseline and its height across it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]
Quad = tuple[Point, Point, Point, Point]
Rect = tuple[float, float, float, float]  # x1, y1, x2, y2


@dataclass(frozen=True)
class TextBox:
    """One detection as the recognizer gave it, in page pixels."""

    quad: Quad  # top-left, top-right, bottom-right, bottom-left
    text: str
    score: float = 1.0

    @classmethod
    def from_rect(
        cls, x1: float, y1: float, x2: float, y2: float, text: str, score: float = 1.0
    ) -> TextBox:
        return cls(((x1, y1), (x2, y1), (x2, y2), (x1, y2)), text, score)

    @classmethod
    def from_points(
        cls, points: Sequence[Sequence[float]], text: str, score: float = 1.0
    ) -> TextBox:
        tl, tr, br, bl = ((float(p[0]), float(p[1])) for p in points)
        return cls((tl, tr, br, bl), text, score)

    @property
    def bounds(self) -> Rect:
        xs = [p[0] for p in self.quad]
        ys = [p[1] for p in self.quad]
        return (min(xs), min(ys), max(xs), max(ys))

    @property
    def centre(self) -> Point:
        return (sum(p[0] for p in self.quad) / 4, sum(p[1] for p in self.quad) / 4)

    @property
    def length(self) -> float:
        """Along the baseline: the mean of the top and bottom edges."""
        tl, tr, br, bl = self.quad
        return (math.dist(tl, tr) + math.dist(bl, br)) / 2

    @property
    def height(self) -> float:
        """Across the baseline: the quad's area over its length, whatever its tilt."""
        return _area(self.quad) / self.length if self.length > 0 else 0.0

    @property
    def angle(self) -> float:
        """The baseline's angle in radians (positive: descending to the right, image axes)."""
        tl, tr, br, bl = self.quad
        dx = (tr[0] - tl[0]) + (br[0] - bl[0])
        dy = (tr[1] - tl[1]) + (br[1] - bl[1])
        return math.atan2(dy, dx)


@dataclass(frozen=True)
class Placed:
    """A box on the deskewed page: an upright rectangle of the box's true length and height
    around its rotated centre. Every layout rule reads these; output boxes use ``box``."""

    box: TextBox
    x1: float
    y1: float
    x2: float
    y2: float

    @property
    def height(self) -> float:
        return self.y2 - self.y1

    @property
    def cy(self) -> float:
        return (self.y1 + self.y2) / 2

    @property
    def cx(self) -> float:
        return (self.x1 + self.x2) / 2

    @property
    def text(self) -> str:
        return self.box.text


def union_bounds(boxes: Sequence[TextBox]) -> Rect:
    rects = [b.bounds for b in boxes]
    return (
        min(r[0] for r in rects),
        min(r[1] for r in rects),
        max(r[2] for r in rects),
        max(r[3] for r in rects),
    )


def _area(quad: Quad) -> float:
    """Shoelace formula; the corners go round the quad in order."""
    total = 0.0
    for (x1, y1), (x2, y2) in zip(quad, quad[1:] + quad[:1], strict=True):
        total += x1 * y2 - x2 * y1
    return abs(total) / 2
