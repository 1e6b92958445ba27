"""Pages fed into the scanner upside down or sideways, read upright.

An archive box holds them: a sheet turned over in the feeder, a landscape table scanned
portrait. Read as they lie, they come back as garbage (a 180° page: median line score ~0.58
against ~0.99 upright, on the shipped sample) or, sideways, as tall boxes whose order no layout
can follow. So when a page's first reading looks like either, the other orientations are read
too and the one that reads best is kept: most confidently read characters, and only when it
beats the first reading clearly. An upright page that reads well costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Literal, cast

import numpy as np

from ocr_worker.engines.layout import TextBox

Rotation = Literal[0, 90, 180, 270]

# Below this median line score a page is read again upside down (upright real scans of the
# accuracy set read at 0.93-0.99; an upside-down page at ~0.58).
DOUBTFUL_SCORE = 0.8
# A turned reading must read this much more (score-weighted characters) to replace an upright
# one: an upside-down page reads ~5x less than the same page upright.
UPSIDE_DOWN_MARGIN = 1.5
# A sideways page's tall lines may read well as crops (the recognizer turns tall crops of one
# of the two sideways feeds), but in no order a layout can follow: a turn that lays them flat
# needs only to read about as well. A page of vertical script reads far worse turned, and stays.
SIDEWAYS_MARGIN = 0.9


@dataclass(frozen=True)
class Reading:
    boxes: list[TextBox]
    pixels: np.ndarray  # the page as read: turned by ``rotation``
    rotation: Rotation  # degrees clockwise the page was turned to read it


def read_upright(pixels: np.ndarray, detect: Callable[[np.ndarray], list[TextBox]]) -> Reading:
    """The page read in the orientation that reads best (``detect``: lines with text and
    scores, in the pixels it is given)."""
    first = Reading(detect(pixels), pixels, 0)
    turns: tuple[int, ...]
    if _mostly_tall(first.boxes):
        turns, margin = (1, 3), SIDEWAYS_MARGIN
    elif first.boxes and median(b.score for b in first.boxes) < DOUBTFUL_SCORE:
        turns, margin = (2,), UPSIDE_DOWN_MARGIN
    else:
        return first
    turned = [_turned(pixels, quarter_turns, detect) for quarter_turns in turns]
    best = max(turned, key=lambda reading: _weight(reading.boxes))
    return best if _weight(best.boxes) > _weight(first.boxes) * margin else first


def _turned(
    pixels: np.ndarray, quarter_turns: int, detect: Callable[[np.ndarray], list[TextBox]]
) -> Reading:
    """The page read turned ``quarter_turns`` times anticlockwise (np.rot90's way)."""
    turned = np.ascontiguousarray(np.rot90(pixels, quarter_turns))
    rotation = cast(Rotation, (360 - 90 * quarter_turns) % 360)  # as degrees clockwise
    return Reading(detect(turned), turned, rotation)


def _weight(boxes: list[TextBox]) -> float:
    """Characters read, each counted by its line's confidence."""
    return sum(box.score * len(box.text.strip()) for box in boxes)


def _mostly_tall(boxes: list[TextBox]) -> bool:
    """Most lines run down the page, not across it (three at least: a stamp is not a page)."""
    tall = 0
    for box in boxes:
        x1, y1, x2, y2 = box.bounds
        tall += (y2 - y1) > 1.5 * (x2 - x1)
    return tall >= 3 and tall > len(boxes) / 2
