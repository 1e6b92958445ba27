"""A page "printed and scanned": what a user really submits, made deterministic.

Each page gets its own seeded profile: 150-300 dpi, a tilt of up to 1.5 degrees either way, a
little optical blur, paper that is not quite white, sensor noise and JPEG compression. The scans
of a document go into an image-only PDF (no text layer), each at its page's original size, so a
reader rendering it at 200 dpi resamples the scan as it would a real one.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

SCAN_DPIS = (150, 200, 240, 300)
MAX_TILT_DEGREES = 1.5


@dataclass(frozen=True)
class ScanProfile:
    dpi: int
    tilt_degrees: float  # counter-clockwise
    blur_radius: float
    paper_level: int  # the paper's grey level (255 = pure white)
    noise_sigma: float
    jpeg_quality: int

    @classmethod
    def for_page(cls, doc_id: str, page_index: int, variant: int = 0) -> ScanProfile:
        """The same page always gets the same scan (seeded by its name, not by run order);
        another ``variant`` is another scan of it (to measure scan-to-scan noise)."""
        name = f"{doc_id}:{page_index}" + (f":{variant}" if variant else "")
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        return cls(
            dpi=int(rng.choice(SCAN_DPIS)),
            tilt_degrees=float(rng.uniform(-MAX_TILT_DEGREES, MAX_TILT_DEGREES)),
            blur_radius=float(rng.uniform(0.3, 0.8)),
            paper_level=int(rng.integers(228, 250)),
            noise_sigma=float(rng.uniform(3.0, 9.0)),
            jpeg_quality=int(rng.integers(55, 86)),
        )

    def seed(self) -> int:
        return zlib.crc32(repr(self).encode())


def scan_page(page: pymupdf.Page, profile: ScanProfile, feed_turn: int = 0) -> bytes:
    """The JPEG a scanner would produce of ``page`` (fed turned ``feed_turn`` degrees)."""
    pix = page.get_pixmap(dpi=profile.dpi, colorspace=pymupdf.csGRAY, alpha=False)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    if feed_turn:
        image = image.rotate(feed_turn, expand=True)
    image = image.filter(ImageFilter.GaussianBlur(profile.blur_radius))
    # The page lies crooked on the glass; the scanner's lid is white around it.
    image = image.rotate(profile.tilt_degrees, resample=Image.Resampling.BICUBIC, fillcolor=255)
    pixels = np.asarray(image, dtype=np.float32) * (profile.paper_level / 255.0)
    rng = np.random.default_rng(profile.seed())
    pixels += rng.normal(0.0, profile.noise_sigma, pixels.shape)  # (H, W)
    scanned = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    out = io.BytesIO()
    scanned.save(out, format="JPEG", quality=profile.jpeg_quality, dpi=(profile.dpi,) * 2)
    return out.getvalue()


def scan_document(
    source: pymupdf.Document,
    doc_id: str,
    page_indices: tuple[int, ...],
    variant: int = 0,
    feed_turn: int = 0,
) -> bytes:
    """An image-only PDF of the scans of ``page_indices``, in that order. ``feed_turn``: each
    sheet went through the scanner turned that many degrees anticlockwise (180: upside down,
    90 or 270: sideways, as a landscape sheet fed portrait)."""
    scanned = pymupdf.open()
    for index in page_indices:
        page = source.load_page(index)
        jpeg = scan_page(page, ScanProfile.for_page(doc_id, index, variant), feed_turn)
        width, height = page.rect.width, page.rect.height
        if feed_turn % 180:
            width, height = height, width
        target = scanned.new_page(width=width, height=height)
        target.insert_image(target.rect, stream=jpeg)
    data = scanned.tobytes(garbage=3, deflate=True)
    scanned.close()
    return bytes(data)
