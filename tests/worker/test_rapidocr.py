"""The real CPU engine on rendered pages."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.rapidocr import RapidOcrEngine
from tests.factories import character_error_rate


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    return RapidOcrEngine(threads=2)


def _render(draw) -> np.ndarray:  # type: ignore[no-untyped-def]
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=420)
    draw(page)
    pix = page.get_pixmap(dpi=150, colorspace=pymupdf.csRGB)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()


def test_a_two_column_page_reads_each_column_whole(engine: RapidOcrEngine) -> None:
    left = ["Alpha column begins", "alpha second line", "alpha third line"]
    right = ["Beta column begins", "beta second line", "beta third line"]

    def draw(page: pymupdf.Page) -> None:
        page.insert_text((60, 60), "Annual Report", fontsize=22)
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            page.insert_text((60, 110 + 18 * i), a, fontsize=12)
            page.insert_text((330, 110 + 18 * i), b, fontsize=12)

    result = engine.recognize_page(PageImage(4, _render(draw)))
    assert result.status == "succeeded" and result.page == 4
    expected = "\n".join(["Annual Report", *left, *right])
    assert character_error_rate(expected, result.text) < 0.05, result.text
    assert result.blocks[0].label == "title"
    assert result.markdown.startswith("## Annual Report")
    x1, y1, x2, y2 = result.blocks[1].bbox  # boxes are in page pixels (150 dpi here)
    assert 100 < x1 < 150 and x2 < 600 and y1 < y2


def test_a_blank_page_succeeds_empty_and_a_broken_image_fails_alone(engine: RapidOcrEngine) -> None:
    blank = PageImage(1, _render(lambda page: None))
    broken = PageImage(2, np.zeros((0, 0, 3), np.uint8))
    results = engine.run_group(PageGroupInput("j", 0, [], [blank, broken], is_last=True))
    assert [(r.page, r.status) for r in results] == [(1, "succeeded"), (2, "failed")]
    assert results[0].text == "" and "OCR failed" in (results[1].error or "")
