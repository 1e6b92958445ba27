"""Detections shaped like RapidOCR's on a real scan: one padded quad per line, rotated with the
page, neighbouring lines' boxes touching (a 34 px box every 30 px), in page pixels."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ocr_worker.engines.layout import TextBox

PAGE = (1700.0, 2200.0)  # an A4-ish page at 200 dpi
BOX_HEIGHT = 34.0
PITCH = 30.0
CHAR = 16.0  # px per character of body text


@dataclass(frozen=True)
class Straight:
    """A box on the page before it was tilted: left edge, top, text, and optionally its width
    (from its characters by default) and height."""

    x: float
    y: float
    text: str
    width: float | None = None
    height: float = BOX_HEIGHT


def scan(boxes: list[Straight], *, degrees: float = 0.7) -> list[TextBox]:
    """The boxes as a detector sees them on the page turned by ``degrees`` about its centre,
    in RapidOCR's order (top to bottom by their top-left corner)."""
    turn = math.radians(degrees)
    cos, sin = math.cos(turn), math.sin(turn)
    cx, cy = PAGE[0] / 2, PAGE[1] / 2
    detections = []
    for box in boxes:
        width = box.width if box.width is not None else CHAR * len(box.text)
        corners = [(box.x, box.y), (box.x + width, box.y)]
        corners += [(box.x + width, box.y + box.height), (box.x, box.y + box.height)]
        quad = [
            (cx + (x - cx) * cos - (y - cy) * sin, cy + (x - cx) * sin + (y - cy) * cos)
            for x, y in corners
        ]
        detections.append(TextBox.from_points(quad, box.text))
    return sorted(detections, key=lambda b: (round(b.quad[0][1] / 10), b.quad[0][0]))


def paragraph(x: float, y: float, lines: list[str], *, indent: float = 48.0) -> list[Straight]:
    """A paragraph whose first line is indented, one pitch per line."""
    return [
        Straight(x + (indent if n == 0 else 0.0), y + PITCH * n, text)
        for n, text in enumerate(lines)
    ]
