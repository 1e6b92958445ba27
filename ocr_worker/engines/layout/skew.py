"""The page's skew, read from the detector's own line quads, and the page turned upright.

Deskewing only the boxes' bounds does not order a tilted page: a long line's bounds grow by
length x sin(tilt), enough to swallow the gap to the next line. Here each box becomes an upright
rectangle of its true size around its centre rotated about the page centre.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

from ocr_worker.engines.layout.boxes import Placed, TextBox

# Only long boxes vote: the angle of a box 4 heights long is already known to about
# atan(2 px / 4 heights) ~ 1 degree on 30 px text; a word-sized box's angle is mostly noise.
MIN_VOTER_ASPECT = 4.0
# A line this long tilted by even 0.2 degrees rises a pixel or more end to end: level means level.
LONG_LINE = 12.0
# A page turned more than this is not a crooked scan but a rotated page (landscape, 90 degrees):
# not ours to straighten, and a wrong guess would scramble everything.
MAX_SKEW = math.radians(10)


def estimate_skew(boxes: Sequence[TextBox]) -> float:
    """Radians (image axes, positive = lines descend to the right); 0.0 without evidence.

    The detector's minimum-area rectangle snaps a blob whose tilt spans under a pixel or two to
    the axes, so on a tilted index page most short entries come back at exactly 0: an exact 0
    is no vote. Only if more long lines (where a tilt would show) are exactly level than tilted
    is the page straight."""
    voters = [
        b
        for b in boxes
        if b.height > 0 and b.length >= MIN_VOTER_ASPECT * b.height and abs(b.angle) <= MAX_SKEW
    ]
    votes = [b.angle for b in voters if b.angle != 0.0]
    level = sum(b.angle == 0.0 and b.length >= LONG_LINE * b.height for b in voters)
    # The median ignores the odd rotated stamp or diagonal label that a mean would follow.
    return median(votes) if len(votes) > level else 0.0


def deskew(boxes: Sequence[TextBox], skew: float, centre: tuple[float, float]) -> list[Placed]:
    """Every box upright on the page rotated by ``-skew`` about ``centre``."""
    cos, sin = math.cos(-skew), math.sin(-skew)
    cx0, cy0 = centre
    placed = []
    for box in boxes:
        bx, by = box.centre
        dx, dy = bx - cx0, by - cy0
        cx, cy = cx0 + dx * cos - dy * sin, cy0 + dx * sin + dy * cos
        half_w, half_h = box.length / 2, box.height / 2
        placed.append(Placed(box, cx - half_w, cy - half_h, cx + half_w, cy + half_h))
    return placed


def upright(boxes: Sequence[TextBox], width: float, height: float) -> list[Placed]:
    """The page's boxes deskewed about the page centre."""
    return deskew(boxes, estimate_skew(boxes), (width / 2, height / 2))
