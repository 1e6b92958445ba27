"""The CPU engine: RapidOCR (PP-OCR det + rec, models inside its wheel), fully offline."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import structlog

from ocr_worker.engines.base import EMPTY_PAGE_WARNING, OcrEngine, PageGroupInput, PageImage
from ocr_worker.engines.layout import LayoutBlock, TextBox, layout_page, render
from ocr_worker.engines.orientation import Reading, read_upright
from uocr_core.contracts import Block, PageResult

log = structlog.get_logger(__name__)


def _route_rapidocr_logs() -> None:
    """RapidOCR logs through a coloured handler of its own, not through the root logger: hand
    its lines to ours, so they are JSON like every other line the worker writes."""
    rapid = logging.getLogger("RapidOCR")
    rapid.handlers.clear()
    rapid.propagate = True


class RapidOcrEngine(OcrEngine):
    name = "rapidocr"

    def __init__(self, *, threads: int = 2, auto_rotate: bool = True) -> None:
        from rapidocr import RapidOCR

        self.auto_rotate = auto_rotate
        # The text-angle classifier flips whole lines 180 degrees on clean pages: keep it off.
        self._ocr = RapidOCR(
            params={
                "Global.use_cls": False,
                "Global.log_level": "warning",
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        _route_rapidocr_logs()

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        return [self.recognize_page(page) for page in group.pages]

    def recognize_page(self, page: PageImage) -> PageResult:
        started = time.perf_counter()
        try:
            reading = (
                read_upright(page.pixels, self.detect)
                if self.auto_rotate
                else Reading(self.detect(page.pixels), page.pixels, 0)
            )
        except Exception as error:  # one bad page must not sink the group
            log.warning("page.failed", page=page.page_no, error=str(error))
            return PageResult(
                page=page.page_no, status="failed", error=f"OCR failed: {error}", engine=self.name
            )
        height, width = reading.pixels.shape[:2]
        result = page_result_from_boxes(page.page_no, reading.boxes, width=width, height=height)
        result.rotation = reading.rotation
        result.engine = self.name
        result.duration_ms = int((time.perf_counter() - started) * 1000)
        return result

    def detect(self, pixels: np.ndarray) -> list[TextBox]:
        """Every detected line with its four corners: the layout measures skew and size on
        them, which the axis-aligned bounds of a tilted line would blur."""
        output: Any = self._ocr(pixels)
        if output.boxes is None or output.txts is None:
            return []
        return [
            TextBox.from_points(quad.tolist(), str(text), float(score))
            for quad, text, score in zip(output.boxes, output.txts, output.scores, strict=True)
        ]


def page_result_from_boxes(
    page_no: int, boxes: list[TextBox], *, width: int, height: int
) -> PageResult:
    blocks = layout_page(boxes, width=width, height=height)
    text = "\n".join(block.text for block in blocks)
    return PageResult(
        page=page_no,
        status="succeeded",
        text=text,
        warnings=[] if text.strip() else [EMPTY_PAGE_WARNING],
        markdown=render(blocks),
        blocks=[_block(block) for block in blocks],
        width=width,
        height=height,
        confidence=page_confidence(boxes),
    )


def page_confidence(boxes: list[TextBox]) -> float | None:
    """The recognizer's line scores weighted by each line's characters: a page of long lines
    read well is not pulled down by a stray mark scored low, nor lifted by page numbers."""
    weights = [(box.score, len(box.text.strip())) for box in boxes if box.text.strip()]
    total = sum(chars for _, chars in weights)
    return round(sum(s * chars for s, chars in weights) / total, 4) if total else None


def _block(block: LayoutBlock) -> Block:
    x1, y1, x2, y2 = block.page_bounds
    return Block(
        label=block.label,
        bbox=(round(x1, 1), round(y1, 1), round(x2, 1), round(y2, 1)),
        text=block.text,
        confidence=round(block.confidence, 4),
    )
