"""A page's scan as an image, rendered in the API from the job's stored input document.

The geometry is the worker's (``ocr_worker/imaging.py``, which the API must not import): PDF
pages at ``render_dpi``, or less so that the longer side stays within ``max_render_side``;
image pages as stored, shrunk to ``max_render_side``. So the blocks' boxes (in pixels of the
rendered page) lie on this image as they lay on the page the engine read.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from dataclasses import dataclass

import pymupdf
from PIL import Image

from uocr_core.mupdf_messages import log_mupdf_messages
from uocr_core.storage import ObjectStore

JPEG_QUALITY = 85
# Bumped whenever the output of render() changes for the same page, so cached copies (ETags)
# of the old rendering are not reused.
RENDERER_VERSION = 1


class PageImageError(RuntimeError):
    """The stored document has no drawable page there (damaged, or shorter than recorded)."""


@dataclass(frozen=True)
class PageImage:
    data: bytes  # JPEG
    width: int
    height: int


class PageImageRenderer:
    """Renders pages of stored inputs as JPEG; keeps the last few small input files in memory,
    because a reader pages through one document, and each page would fetch it again."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        dpi: int,
        max_side: int,
        cached_files: int = 2,
        max_cached_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.dpi = dpi
        self.max_side = max_side
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._cached_files = cached_files
        self._max_cached_bytes = max_cached_bytes
        self._files_lock = threading.Lock()
        # MuPDF is not thread-safe and the API serves requests from a thread pool: one page
        # renders at a time in this process.
        self._render_lock = threading.Lock()

    def render(
        self, source_key: str, index: int, *, max_width: int | None = None, rotation: int = 0
    ) -> PageImage:
        """Page ``index`` (0-based) of the stored file, as the worker saw it: turned
        ``rotation`` degrees clockwise when it was read turned; narrowed to ``max_width``
        pixels (aspect kept) when that is smaller. ObjectNotFound if the file is gone,
        PageImageError if the page cannot be drawn."""
        data = self._fetch(source_key)
        try:
            with self._render_lock:
                image = (
                    self._render_pdf(data, index)
                    if source_key.endswith(".pdf")
                    else self._load_image(data, index)
                )
        except PageImageError:
            raise
        except Exception as error:  # MuPDF and Pillow raise many kinds for a damaged file
            raise PageImageError(f"page {index + 1} cannot be rendered: {error}") from error
        if rotation:
            image = image.rotate(-rotation, expand=True)  # Pillow turns anticlockwise
        if max_width is not None and max_width < image.width:
            height = max(1, round(image.height * max_width / image.width))
            image = image.resize((max_width, height), Image.Resampling.LANCZOS)
        return _jpeg(image)

    def _fetch(self, key: str) -> bytes:
        with self._files_lock:
            if key in self._files:
                self._files.move_to_end(key)
                return self._files[key]
        data = self.store.get(key)
        if len(data) > self._max_cached_bytes:
            return data
        with self._files_lock:
            self._files[key] = data
            while len(self._files) > self._cached_files or self._cached_size() > (
                self._max_cached_bytes
            ):
                self._files.popitem(last=False)
        return data

    def _cached_size(self) -> int:
        return sum(len(data) for data in self._files.values())

    def _render_pdf(self, data: bytes, index: int) -> Image.Image:
        try:
            with pymupdf.open(stream=data, filetype="pdf") as doc:
                if not 0 <= index < doc.page_count:
                    raise PageImageError(f"the PDF has no page {index + 1}")
                page = doc.load_page(index)
                pix = page.get_pixmap(
                    matrix=render_matrix(page.rect, dpi=self.dpi, max_side=self.max_side),
                    colorspace=pymupdf.csRGB,
                    alpha=False,
                )
                return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        finally:
            # The worker does the same after each page: MuPDF's process-wide store keeps every
            # decoded scan (up to 256 MB) though no later page reuses it.
            pymupdf.TOOLS.store_shrink(100)
            log_mupdf_messages(page_index=index)

    def _load_image(self, data: bytes, index: int) -> Image.Image:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(index)  # a multi-page TIFF's page; EOFError past its end
            rgb = image.convert("RGB")
        if max(rgb.size) > self.max_side:
            rgb.thumbnail((self.max_side, self.max_side))
        return rgb


def render_matrix(rect: pymupdf.Rect, *, dpi: int, max_side: int) -> pymupdf.Matrix:
    """The worker's scale: ``dpi``, or less so that the longer side is at most ``max_side``."""
    longest_points = max(rect.width, rect.height, 1.0)
    zoom = min(dpi / 72, max_side / longest_points)
    return pymupdf.Matrix(zoom, zoom)


def _jpeg(image: Image.Image) -> PageImage:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return PageImage(buffer.getvalue(), image.width, image.height)
