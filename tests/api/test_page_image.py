"""The API's page renderer draws each page exactly as the worker does (same size, same pixels
up to JPEG), so the blocks' boxes the engine found lie on the scan the console shows."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocr_worker.imaging import PageRasterizer
from tests.factories import sample_pages, scanned_pdf
from uocr_core.jobs.page_image import PageImageError, PageImageRenderer
from uocr_core.storage import LocalObjectStore

DPI, MAX_SIDE = 150, 4000


def _pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "JPEG"
        return np.asarray(image.convert("RGB"), dtype=np.int16)  # (H, W, 3)


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    store = LocalObjectStore(tmp_path)
    store.put("jobs/j/input/000.pdf", scanned_pdf(sample_pages(2, lines=3), seed=3))
    frames = [Image.new("RGB", (300 + 100 * i, 200), (40 * i, 90, 200)) for i in range(3)]
    tiff = io.BytesIO()
    frames[0].save(
        tiff, format="TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate"
    )
    store.put("jobs/j/input/001.tiff", tiff.getvalue())
    return store


@pytest.mark.parametrize(
    ("key", "index"), [("jobs/j/input/000.pdf", 1), ("jobs/j/input/001.tiff", 2)]
)
def test_pages_render_at_the_workers_geometry_and_pixels(
    store: LocalObjectStore, key: str, index: int
) -> None:
    worker = PageRasterizer(store, dpi=DPI, max_side=MAX_SIDE).render(key, index)  # (H, W, 3)
    image = PageImageRenderer(store, dpi=DPI, max_side=MAX_SIDE).render(key, index)

    pixels = _pixels(image.data)
    assert pixels.shape == worker.shape and (image.height, image.width) == worker.shape[:2]
    assert np.abs(pixels - worker.astype(np.int16)).mean() < 4  # JPEG's loss only


def test_max_side_holds_for_images_and_pdfs(store: LocalObjectStore) -> None:
    renderer = PageImageRenderer(store, dpi=DPI, max_side=256)
    pdf_page = renderer.render("jobs/j/input/000.pdf", 0)
    tiff_page = renderer.render("jobs/j/input/001.tiff", 2)
    assert max(pdf_page.width, pdf_page.height) <= 256
    assert (tiff_page.width, tiff_page.height) == (256, 102)  # 500x200 shrunk, aspect kept


def test_a_narrower_width_keeps_the_aspect_and_a_wider_one_is_ignored(
    store: LocalObjectStore,
) -> None:
    renderer = PageImageRenderer(store, dpi=DPI, max_side=MAX_SIDE)
    full = renderer.render("jobs/j/input/000.pdf", 0)
    narrow = renderer.render("jobs/j/input/000.pdf", 0, max_width=400)
    assert narrow.width == 400
    assert narrow.height == round(full.height * 400 / full.width)
    assert renderer.render("jobs/j/input/000.pdf", 0, max_width=9000).width == full.width


def test_pages_differ_and_a_missing_page_is_an_error(store: LocalObjectStore) -> None:
    renderer = PageImageRenderer(store, dpi=DPI, max_side=MAX_SIDE)
    first, second = (renderer.render("jobs/j/input/000.pdf", i).data for i in (0, 1))
    assert first != second
    with pytest.raises(PageImageError, match="no page 3"):
        renderer.render("jobs/j/input/000.pdf", 2)
    with pytest.raises(PageImageError):
        renderer.render("jobs/j/input/001.tiff", 3)


def test_small_inputs_are_fetched_once_and_large_ones_are_not_kept(
    store: LocalObjectStore,
) -> None:
    fetched: list[str] = []
    original_get = store.get

    def counting_get(key: str) -> bytes:
        fetched.append(key)
        return original_get(key)

    store.get = counting_get  # type: ignore[method-assign]
    renderer = PageImageRenderer(store, dpi=DPI, max_side=MAX_SIDE, max_cached_bytes=10_000)
    for _ in range(2):
        renderer.render("jobs/j/input/001.tiff", 0)  # a few KB: kept
        renderer.render("jobs/j/input/000.pdf", 0)  # larger than the cache: fetched each time
    assert fetched.count("jobs/j/input/001.tiff") == 1
    assert fetched.count("jobs/j/input/000.pdf") == 2


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_a_page_read_turned_is_shown_as_the_engine_read_it(
    store: LocalObjectStore, rotation: int
) -> None:
    """A sheet fed upside down or sideways is read turned upright (PageResult.rotation), and
    its boxes are in the turned page's pixels: the scan the console shows is turned the same."""
    worker = PageRasterizer(store, dpi=DPI, max_side=MAX_SIDE).render("jobs/j/input/000.pdf", 0)
    read = np.rot90(worker, -rotation // 90)  # clockwise, as the engine turned it
    image = PageImageRenderer(store, dpi=DPI, max_side=MAX_SIDE).render(
        "jobs/j/input/000.pdf", 0, rotation=rotation
    )
    pixels = _pixels(image.data)
    assert pixels.shape == read.shape
    assert np.abs(pixels - read.astype(np.int16)).mean() < 4
