"""The real CPU engine on rendered pages."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.layout import TextBox
from ocr_worker.engines.rapidocr import RapidOcrEngine, page_confidence
from tests.factories import character_error_rate

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pdf"


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    return RapidOcrEngine(threads=2)


def _render(draw, height: int = 420) -> np.ndarray:  # type: ignore[no-untyped-def]
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=height)
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
    assert result.markdown.startswith("# Annual Report\n\n")  # 22pt over 12pt: a title
    assert result.confidence is not None and result.confidence > 0.9  # clean print, read well
    x1, y1, x2, y2 = result.blocks[1].bbox  # boxes are in page pixels (150 dpi here)
    assert 100 < x1 < 150 and x2 < 600 and y1 < y2


def test_a_blank_page_succeeds_empty_and_a_broken_image_fails_alone(engine: RapidOcrEngine) -> None:
    blank = PageImage(1, _render(lambda page: None))
    broken = PageImage(2, np.zeros((0, 0, 3), np.uint8))
    results = engine.run_group(PageGroupInput("j", 0, [], [blank, broken], is_last=True))
    assert [(r.page, r.status) for r in results] == [(1, "succeeded"), (2, "failed")]
    assert results[0].text == "" and "OCR failed" in (results[1].error or "")


NATO = [
    "Alpha",
    "Bravo",
    "Charlie",
    "Delta",
    "Echo",
    "Foxtrot",
    "Golf",
    "Hotel",
    "India",
    "Juliet",
    "Kilo",
    "Lima",
    "Mike",
]


def _scanned(pixels: np.ndarray, *, degrees: float, seed: int) -> np.ndarray:
    """The page as a scanner returns it: turned a little, noisy, JPEG-compressed."""
    image = Image.fromarray(pixels).rotate(
        degrees, resample=Image.Resampling.BICUBIC, fillcolor=(255, 255, 255)
    )
    rng = np.random.default_rng(seed)
    noisy = np.asarray(image, np.float32) + rng.normal(0, 8, pixels.shape)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=70)
    return np.asarray(Image.open(buffer).convert("RGB"))


def test_a_tilted_noisy_scan_reads_paragraphs_then_columns_in_order(
    engine: RapidOcrEngine,
) -> None:
    # Regression: on a crooked scan the line boxes touch, and the old order read each
    # paragraph by left edge (its indented first line last).
    prose = [
        f"{word} paragraph line {n} keeps the archive records of the district council in good order"
        for word in NATO[:3]
        for n in range(1, 5)
    ]
    left = [f"{NATO[3 + n]} left column entry" for n in range(5)]
    right = [f"{NATO[8 + n].lower()} right column entry" for n in range(5)]

    def draw(page: pymupdf.Page) -> None:
        page.insert_text((60, 70), "Chapter Two Records", fontsize=20)
        for n, line in enumerate(prose):
            indent = 20 if n % 4 == 0 else 0
            page.insert_text((60 + indent, 110 + 13 * n + 5 * (n // 4)), line, fontsize=11)
        for n, (a, b) in enumerate(zip(left, right, strict=True)):
            page.insert_text((60, 350 + 16 * n), a, fontsize=11)
            page.insert_text((320, 350 + 16 * n), b, fontsize=11)

    pixels = _scanned(_render(draw, height=460), degrees=0.7, seed=3)
    result = engine.recognize_page(PageImage(1, pixels))
    expected = ["Chapter Two Records", *prose, *left, *right]
    # Bare RapidOCR reads the columns across (4% here), the old order shuffled the paragraphs.
    assert character_error_rate("\n".join(expected), result.text) < 0.01, result.text
    starts = [result.text.find(" ".join(line.split()[:2])) for line in expected]
    assert -1 not in starts and starts == sorted(starts), result.text
    assert result.blocks[0].label == "title"


def _sample_page(index: int) -> np.ndarray:
    """A page of the shipped sample: a scan (noise, JPEG) of a page of numbered lines."""
    with pymupdf.open(SAMPLE) as sample:
        pix = sample[index].get_pixmap(dpi=150, colorspace=pymupdf.csRGB)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()


@pytest.mark.parametrize(("quarter_turns", "rotation"), [(2, 180), (1, 90), (3, 270)])
def test_a_sheet_fed_upside_down_or_sideways_is_read_upright(
    engine: RapidOcrEngine, quarter_turns: int, rotation: int
) -> None:
    upright = _sample_page(1)
    expected = engine.recognize_page(PageImage(2, upright))
    assert expected.rotation == 0  # an upright page that reads well is not turned
    fed = np.ascontiguousarray(np.rot90(upright, quarter_turns))  # anticlockwise
    read = engine.recognize_page(PageImage(2, fed))
    assert read.rotation == rotation
    assert (read.width, read.height) == (expected.width, expected.height)  # the upright page's
    assert character_error_rate(expected.text, read.text) < 0.02
    as_it_lies = RapidOcrEngine(threads=2, auto_rotate=False).recognize_page(PageImage(2, fed))
    assert as_it_lies.rotation == 0
    assert character_error_rate(expected.text, as_it_lies.text) > 0.3  # what it was before


def test_a_pages_confidence_weighs_its_lines_by_their_characters() -> None:
    long_line = TextBox.from_rect(0, 0, 900, 30, "a long line of body text read well", 0.98)
    stray = TextBox.from_rect(0, 40, 20, 60, "~", 0.10)
    assert page_confidence([long_line, stray]) == pytest.approx(
        (0.98 * 34 + 0.10) / 35, abs=1e-4
    )  # kept to 4 places
    assert page_confidence([stray]) == pytest.approx(0.10)
    assert page_confidence([]) is None  # a blank page says nothing
