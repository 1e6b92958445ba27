"""Rasterising pages: PDF pages with PyMuPDF, image files (PNG, JPEG, multi-page TIFF) as stored."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

import numpy as np
import pymupdf
from PIL import Image

from ocr_api.core.storage import ObjectStore


class PageRenderError(RuntimeError):
    pass


class PageRasterizer:
    """Renders pages of stored inputs; keeps the last few input files in memory, not all."""

    def __init__(self, store: ObjectStore, *, dpi: int, max_side: int, cached_files: int = 2):
        self.store = store
        self.dpi = dpi
        self.max_side = max_side
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._cached_files = cached_files
        self._lock = threading.Lock()

    def render(self, source_key: str, index: int) -> np.ndarray:
        """(H, W, 3) uint8 RGB pixels of page ``index`` of the stored file ``source_key``."""
        data = self._fetch(source_key)
        try:
            if source_key.endswith(".pdf"):
                return self._render_pdf(data, index)
            return self._load_image(data, index)
        except PageRenderError:
            raise
        except Exception as error:
            raise PageRenderError(f"page cannot be rendered: {error}") from error

    def _fetch(self, key: str) -> bytes:
        with self._lock:  # GPU workers render from several task threads
            if key in self._files:
                self._files.move_to_end(key)
                return self._files[key]
        data = self.store.get(key)
        with self._lock:
            self._files[key] = data
            while len(self._files) > self._cached_files:
                self._files.popitem(last=False)
        return data

    def _render_pdf(self, data: bytes, index: int) -> np.ndarray:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            page = doc.load_page(index)
            longest_inch = max(page.rect.width, page.rect.height) / 72
            dpi = min(self.dpi, int(self.max_side / longest_inch)) if longest_inch else self.dpi
            pix = page.get_pixmap(dpi=max(dpi, 36), colorspace=pymupdf.csRGB, alpha=False)
            pixels = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, 3)
            return pixels.copy()

    def _load_image(self, data: bytes, index: int) -> np.ndarray:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(index)
            rgb = image.convert("RGB")
            if max(rgb.size) > self.max_side:
                rgb.thumbnail((self.max_side, self.max_side))
            return np.asarray(rgb, dtype=np.uint8).copy()
