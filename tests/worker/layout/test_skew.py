from __future__ import annotations

import math

from ocr_worker.engines.layout import TextBox
from ocr_worker.engines.layout.skew import estimate_skew
from tests.worker.layout.scans import Straight, scan


def _long_lines(count: int) -> list[Straight]:
    return [Straight(200, 300 + 30 * n, "x" * 80) for n in range(count)]


def test_the_skew_is_read_from_the_quads_of_long_lines() -> None:
    for degrees in (0.7, -1.2, 0.3):
        skew = math.degrees(estimate_skew(scan(_long_lines(10), degrees=degrees)))
        assert abs(skew - degrees) < 0.01, (degrees, skew)


def test_short_boxes_the_detector_snapped_level_do_not_vote() -> None:
    # On a tilted index page most entries come back exactly axis-aligned.
    level = [TextBox.from_rect(200, 300 + 30 * n, 400, 334 + 30 * n, "entry") for n in range(40)]
    tilted = scan(_long_lines(3), degrees=0.8)
    assert abs(math.degrees(estimate_skew(level + tilted)) - 0.8) < 0.01


def test_a_straight_page_has_no_skew_and_no_evidence_is_none() -> None:
    straight = scan(_long_lines(10), degrees=0.0)
    assert estimate_skew(straight) == 0.0
    assert estimate_skew([TextBox.from_rect(0, 0, 30, 30, "a")]) == 0.0


def test_a_tilted_box_is_measured_across_its_baseline_not_by_its_bounds() -> None:
    (box,) = scan([Straight(200, 300, "x" * 80, height=34)], degrees=0.9)
    x1, y1, x2, y2 = box.bounds
    assert y2 - y1 > 50  # the axis-aligned box grew by 1280 px x sin(0.9 degrees)
    assert abs(box.height - 34) < 0.01 and abs(box.length - 1280) < 0.01
