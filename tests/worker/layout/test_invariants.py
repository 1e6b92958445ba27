"""Whatever the detections, every box comes out exactly once (nothing lost, nothing twice)."""

from __future__ import annotations

import math
import random

from ocr_worker.engines.layout import TextBox, layout_page, render

TEXTS = ["hello world", "中文文本", "32", "- 3 -", "x", "# hi", "> a <- 1", "• item", "2.1 Title"]


def _random_page(rng: random.Random) -> list[TextBox]:
    boxes = []
    for n in range(rng.randint(0, 60)):
        x, y = rng.uniform(-50, 1700), rng.uniform(-50, 2200)
        w, h = rng.choice([0.0, 1.0, rng.uniform(1, 1500)]), rng.choice([0.0, rng.uniform(1, 80)])
        turn = math.radians(rng.uniform(-20, 20)) if rng.random() < 0.5 else 0.0
        c, s = math.cos(turn), math.sin(turn)
        corners = [(x, y), (x + w * c, y + w * s), (x + w * c - h * s, y + w * s + h * c)]
        corners.append((x - h * s, y + h * c))
        boxes.append(TextBox.from_points(corners, f"{rng.choice(TEXTS)} {n}"))
    return boxes


def test_every_detection_is_laid_out_once_on_random_pages() -> None:
    rng = random.Random(9)
    for _ in range(25):
        boxes = _random_page(rng)
        blocks = layout_page(boxes, width=1700, height=2200)
        render(blocks)
        laid = sorted(b.box.text for block in blocks for line in block.lines for b in line.boxes)
        assert laid == sorted(b.text for b in boxes)
