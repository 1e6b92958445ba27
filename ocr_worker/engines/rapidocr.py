"""The CPU engine: RapidOCR (PP-OCR det + rec, models inside its wheel), fully offline."""

from __future__ import annotations

import re
import time
from statistics import median
from typing import Any

import numpy as np
import structlog

from ocr_api.core.contracts import Block, PageResult
from ocr_worker.engines.base import OcrEngine, PageGroupInput, PageImage
from ocr_worker.engines.reading_order import Paragraph, TextBox, group_paragraphs, order_boxes

log = structlog.get_logger(__name__)

TITLE_HEIGHT_RATIO = 1.25  # a lone line this much taller than body text is a heading
LIST_ITEM = re.compile(r"^(\d{1,3}[.)]|[-*\u2022])\s")


class RapidOcrEngine(OcrEngine):
    name = "rapidocr"

    def __init__(self, *, threads: int = 2) -> None:
        from rapidocr import RapidOCR

        # The text-angle classifier flips whole lines 180 degrees on clean pages: keep it off.
        self._ocr = RapidOCR(
            params={
                "Global.use_cls": False,
                "Global.log_level": "warning",
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        return [self.recognize_page(page) for page in group.pages]

    def recognize_page(self, page: PageImage) -> PageResult:
        started = time.perf_counter()
        height, width = page.pixels.shape[:2]
        try:
            boxes = self.detect(page.pixels)
        except Exception as error:  # one bad page must not sink the group
            log.warning("page.failed", page=page.page_no, error=str(error))
            return PageResult(
                page=page.page_no, status="failed", error=f"OCR failed: {error}", engine=self.name
            )
        result = page_result_from_boxes(page.page_no, boxes, width=width, height=height)
        result.engine = self.name
        result.duration_ms = int((time.perf_counter() - started) * 1000)
        return result

    def detect(self, pixels: np.ndarray) -> list[TextBox]:
        output: Any = self._ocr(pixels)
        if output.boxes is None or output.txts is None:
            return []
        boxes = []
        for quad, text, score in zip(output.boxes, output.txts, output.scores, strict=True):
            xs, ys = quad[:, 0], quad[:, 1]
            boxes.append(
                TextBox(
                    float(xs.min()),
                    float(ys.min()),
                    float(xs.max()),
                    float(ys.max()),
                    str(text),
                    float(score),
                )
            )
        return boxes


def page_result_from_boxes(
    page_no: int, boxes: list[TextBox], *, width: int, height: int
) -> PageResult:
    paragraphs = group_paragraphs(order_boxes(boxes))
    body_height = median(b.height for b in boxes) if boxes else 0.0
    blocks = [_block(p, body_height) for p in paragraphs]
    markdown = "\n\n".join(_markdown(block) for block in blocks)
    return PageResult(
        page=page_no,
        status="succeeded",
        text="\n".join(line for p in paragraphs for line in p.line_texts),
        markdown=markdown,
        blocks=blocks,
        width=width,
        height=height,
    )


def _block(paragraph: Paragraph, body_height: float) -> Block:
    x1, y1, x2, y2 = paragraph.bbox
    lone_tall_line = len(paragraph.lines) == 1 and (y2 - y1) >= TITLE_HEIGHT_RATIO * body_height
    scores = [box.score for line in paragraph.lines for box in line]
    return Block(
        label="title" if lone_tall_line else "text",
        bbox=(round(x1, 1), round(y1, 1), round(x2, 1), round(y2, 1)),
        text="\n".join(paragraph.line_texts),
        confidence=round(min(scores), 4),
    )


def _markdown(block: Block) -> str:
    if block.label == "title":
        return "## " + block.text
    # Wrapped lines join into one; a list item keeps its own line.
    merged: list[str] = []
    for line in block.text.splitlines():
        if merged and not LIST_ITEM.match(line):
            merged[-1] += " " + line
        else:
            merged.append(line)
    return "\n".join(merged)
