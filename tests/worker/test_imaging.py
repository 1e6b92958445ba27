"""Rasterising: max_render_side always holds, and a damaged file's pages are flagged."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest
from PIL import Image

from ocr_api.core.settings import S3Settings
from ocr_api.core.storage import LocalObjectStore
from ocr_worker.imaging import (
    REPAIRED_WARNING,
    PageRasterizer,
    PageRenderError,
    ProcessRasterizer,
    RenderedPage,
    render_matrix,
)
from tests.factories import sample_pages, scanned_pdf


def test_max_render_side_holds_for_a_page_of_20000_points() -> None:
    matrix = render_matrix(pymupdf.Rect(0, 0, 20_000, 20_000), dpi=200, max_side=4000)
    assert round(20_000 * matrix.a) == 4000  # was 36 dpi at least: 10,000 px
    small = render_matrix(pymupdf.Rect(0, 0, 612, 792), dpi=200, max_side=4000)
    assert small.a == pytest.approx(200 / 72)


def test_a_truncated_pdf_renders_flagged_and_its_lost_pages_fail(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalObjectStore(tmp_path)
    whole = scanned_pdf(sample_pages(4, lines=2))
    store.put("cut.pdf", whole[: int(len(whole) * 0.6)])
    rasterizer = PageRasterizer(store, dpi=50, max_side=4000)
    first = rasterizer.render_page("cut.pdf", 0)
    assert first.warnings == (REPAIRED_WARNING,)
    assert int(np.asarray(first.pixels).min()) < 255
    with pytest.raises(PageRenderError, match="damaged"):
        rasterizer.render_page("cut.pdf", 3)
    store.put("whole.pdf", whole)
    assert rasterizer.render_page("whole.pdf", 3).warnings == ()


def test_a_pdf_page_is_drawn_no_larger_than_the_engine_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A4 at 200 dpi is 1654 x 2339; the GPU engine reads 1024 on the long side. The smaller
    drawing is the same page, and it carries the full drawing's size for the results."""
    store = LocalObjectStore(tmp_path)
    store.put("scan.pdf", scanned_pdf(sample_pages(2, lines=12, seed=4), seed=4))
    rasterizer = PageRasterizer(store, dpi=200, max_side=4000)
    full, small = rasterizer.render_page("scan.pdf", 0), rasterizer.render_page("scan.pdf", 0, 1024)
    height, width = full.pixels.shape[:2]
    assert max(height, width) > 2000 and full.size is None
    assert max(small.pixels.shape[:2]) == 1024 and small.size == (width, height)
    shrunk = np.asarray(Image.fromarray(full.pixels).resize(small.pixels.shape[1::-1]), float)
    other = rasterizer.render_page("scan.pdf", 1, 1024).pixels.astype(float)
    same_page = np.abs(shrunk - small.pixels).mean()
    assert same_page < 4 < np.abs(shrunk - other).mean()  # the same page, not its neighbour
    roomy = rasterizer.render_page("scan.pdf", 0, 5000)  # no smaller than the dpi gives
    assert roomy.size is None and np.array_equal(roomy.pixels, full.pixels)


def test_a_damaged_page_in_a_run_sent_to_one_render_process_fails_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A group's pages of one file go to one render process together: the page that cannot
    be drawn comes back as its error, in its place, and its neighbours are drawn."""
    store = LocalObjectStore(tmp_path)
    whole = scanned_pdf(sample_pages(4, lines=2))
    store.put("cut.pdf", whole[: int(len(whole) * 0.6)])
    store.put("whole.pdf", whole)
    pool = ProcessRasterizer(S3Settings(local_root=tmp_path), dpi=50, max_side=4000, processes=2)
    try:
        refs = [("cut.pdf", 0), ("cut.pdf", 3), ("cut.pdf", 1), ("whole.pdf", 3)]
        drawn = pool.render_many(refs)
    finally:
        pool.pool.shutdown()
    assert [type(page).__name__ for page in drawn] == [
        "RenderedPage",
        "PageRenderError",
        "RenderedPage",
        "RenderedPage",
    ]
    assert "damaged" in str(drawn[1])
    alone = PageRasterizer(store, dpi=50, max_side=4000)
    for (key, index), page in zip(refs, drawn, strict=True):
        if isinstance(page, RenderedPage):  # each page its own drawing, not a neighbour's
            assert np.array_equal(page.pixels, alone.render_page(key, index).pixels)
