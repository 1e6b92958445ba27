"""Rasterising: max_render_side always holds, a damaged file's pages are flagged, and a render
process that dies leaves a working pool."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from ocr_worker import imaging
from ocr_worker.imaging import (
    REPAIRED_WARNING,
    PageRasterizer,
    PageRenderError,
    ProcessRasterizer,
    RenderedPage,
    RenderProcessCrashed,
    render_matrix,
)
from tests.factories import sample_pages, scanned_pdf
from uocr_core.settings import S3Settings
from uocr_core.storage import LocalObjectStore


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


def _one_page(change: str = "") -> bytes:
    """A page of text, then damaged one way (``change``), or a blank page."""
    doc = pymupdf.open()
    page = doc.new_page()
    if change != "blank":
        page.insert_text((72, 72), "Minutes of the meeting " * 3, fontsize=12)
    if change == "binary contents":
        doc.update_stream(page.get_contents()[0], bytes(range(256)) * 20)
    if change == "contents not a stream":
        doc.xref_set_key(page.xref, "Contents", "42")
    if change == "a million points wide":
        doc.xref_set_key(page.xref, "MediaBox", "[0 0 1000000 1000000]")
    return doc.tobytes()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("binary contents", "damaged"),
        ("contents not a stream", "damaged"),
        ("a million points wide", "unrenderable"),
    ],
)
def test_a_page_that_draws_nothing_because_it_is_damaged_fails_with_the_reason(
    tmp_path: Path, change: str, reason: str
) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("page.pdf", _one_page(change))
    with pytest.raises(PageRenderError, match=f"page 1 of the PDF is {reason}"):
        PageRasterizer(store, dpi=100, max_side=4000).render_page("page.pdf", 0)


def test_a_blank_page_and_a_page_drawn_in_part_still_render(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("blank.pdf", _one_page("blank"))
    doc = pymupdf.open(stream=_one_page(), filetype="pdf")
    doc.update_stream(doc[0].get_contents()[0], b"BT /F1 12 Tf 72 720 Td (abc) Tj ]]] >> ET")
    store.put("part.pdf", doc.tobytes())
    rasterizer = PageRasterizer(store, dpi=100, max_side=4000)
    blank = rasterizer.render_page("blank.pdf", 0)
    assert (blank.warnings, int(blank.pixels.min())) == ((), 255)  # read as an empty page
    assert int(rasterizer.render_page("part.pdf", 0).pixels.min()) < 255


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


def _end_this_process() -> None:
    """What MuPDF crashing on a page, or the kernel's OOM killer, does to a render process."""
    os.kill(os.getpid(), signal.SIGKILL)


def _rasterizers(tmp_path: Path, processes: int) -> tuple[ProcessRasterizer, PageRasterizer]:
    store = LocalObjectStore(tmp_path)
    store.put("a.pdf", scanned_pdf(sample_pages(3, lines=2)))
    store.put("b.pdf", scanned_pdf(sample_pages(2, lines=2, seed=5)))
    pool = ProcessRasterizer(
        S3Settings(local_root=tmp_path), dpi=50, max_side=4000, processes=processes
    )
    return pool, PageRasterizer(store, dpi=50, max_side=4000)


REFS = [("a.pdf", 0), ("a.pdf", 1), ("a.pdf", 2), ("b.pdf", 0), ("b.pdf", 1)]


def _same_pages(drawn: list[RenderedPage | PageRenderError], alone: PageRasterizer) -> bool:
    return all(
        isinstance(page, RenderedPage)
        and np.array_equal(page.pixels, alone.render_page(key, index).pixels)
        for (key, index), page in zip(REFS, drawn, strict=True)
    )


def test_a_render_process_that_died_between_groups_leaves_a_working_pool(tmp_path: Path) -> None:
    pool, alone = _rasterizers(tmp_path, processes=2)
    try:
        assert _same_pages(pool.render_many(REFS), alone)
        os.kill(next(iter(pool.pool._processes)), signal.SIGKILL)  # type: ignore[attr-defined]
        assert _same_pages(pool.render_many(REFS), alone)  # was BrokenProcessPool, for good
        assert pool.restarts == 1
    finally:
        pool.pool.shutdown()


def test_pages_caught_in_a_crash_are_drawn_again_and_a_task_that_crashes_twice_fails(
    tmp_path: Path,
) -> None:
    pool, alone = _rasterizers(tmp_path, processes=1)
    try:
        crash = pool._submit_task(_end_this_process, ())  # ahead of the pages in the queue
        renderings = pool._submit(REFS, None)
        assert _same_pages(pool._collect(renderings), alone)  # caught in it: drawn again
        with pytest.raises(RenderProcessCrashed, match="_end_this_process: ended a render"):
            pool._result(imaging._Task(_end_this_process, (), *crash))
        assert pool.restarts == 2  # the crash, then the same task crashing the new pool
        assert _same_pages(pool.render_many(REFS), alone)
    finally:
        pool.pool.shutdown()
