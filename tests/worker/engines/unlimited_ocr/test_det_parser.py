from __future__ import annotations

import pytest

from ocr_worker.engines.unlimited_ocr.output.det_parser import parse_page

RAW = (
    "<|det|>title [100, 50, 899, 90]<|/det|>Annual Report\n"
    "<|det|>text [100, 120, 899, 300]<|/det|>Revenue grew in every quarter.\n"
    "<|det|>table [100, 320, 899, 600]<|/det|><table><tr><td>Q1</td><td>10</td></tr></table>\n"
    "<|det|>image [100, 620, 500, 900]<|/det|>\n"
)


def test_det_blocks_become_structured_blocks_in_page_pixels() -> None:
    page = parse_page(RAW, width=1998, height=999)
    assert [b.label for b in page.blocks] == ["title", "text", "table", "image"]
    assert page.blocks[0].bbox == (200.0, 50.0, 1798.0, 90.0)
    assert page.blocks[2].text.startswith("<table><tr><td>Q1")
    assert page.markdown.split("\n\n") == [
        "## Annual Report",
        "Revenue grew in every quarter.",
        "<table><tr><td>Q1</td><td>10</td></tr></table>",
    ]
    assert "Q1" in page.text and page.text.startswith("Annual Report")


def test_text_without_tags_is_kept() -> None:
    page = parse_page("plain words <|ref|>x<|/ref|>", width=10, height=10)
    assert [(b.label, b.text) for b in page.blocks] == [("text", "plain words x")]


def test_any_label_the_grammar_allows_is_kept_and_a_block_ends_at_the_next_tag() -> None:
    raw = (
        "<|det|>figure/chart [10, 20, 30, 40]<|/det|>\n"
        "<|det|>page_number [480, 960, 520, 980]<|/det|>32"
    )
    page = parse_page(raw, width=999, height=999)
    assert [(b.label, b.text) for b in page.blocks] == [("figure/chart", ""), ("page_number", "32")]
    assert page.blocks[0].bbox == (10.0, 20.0, 30.0, 40.0)


def test_a_page_drawn_small_for_the_model_reports_boxes_at_the_render_dpi() -> None:
    """The pipeline draws pages at 1024 a side for the GPU engine; the boxes (0-999 of the
    page) land in the page's geometry at the service's render dpi, where the console and the
    searchable PDF draw them."""
    import numpy as np

    from ocr_worker.engines.base import PageGroupInput, PageImage
    from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
    from ocr_worker.engines.unlimited_ocr.output.sections import page_results

    small = np.zeros((1024, 724, 3), dtype=np.uint8)  # A4 drawn for the model
    page = PageImage(1, small, size=(1654, 2339))  # A4 at 200 dpi
    guard = PageGuard(
        num_pages=1,
        eos_id=1,
        marker_ids=(),
        page_budget=100,
        token_text=str,
        framed=False,
        ngram_size=0,
    )
    [result] = page_results(
        PageGroupInput("j", 0, [], [page], True), RAW, guard, engine="unlimited_ocr"
    )
    assert (result.width, result.height) == (1654, 2339)
    expected = (100 / 999 * 1654, 50 / 999 * 2339, 899 / 999 * 1654, 90 / 999 * 2339)
    assert result.blocks[0].bbox == pytest.approx(expected, abs=0.05)
