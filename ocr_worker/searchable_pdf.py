"""The searchable PDF: every page's original scan, with the text read from it laid invisibly over
it where it was read, so a PDF reader can search, select and copy what the page shows.

Pages are placed as they are viewed (rotation and crop box applied), so the boxes the engines
give in rendered-page pixels map onto them by one scale. A page that failed or was canceled
keeps its scan and carries no text: no page is dropped.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from dataclasses import dataclass

import pymupdf
from PIL import Image

from ocr_api.core.contracts import Block, PageResult
from ocr_worker.imaging import release_mupdf_store

TABLE_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S | re.I)
TABLE_CELL = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")
TEXT_FONT = "cjk"  # MuPDF's built-in Droid Sans Fallback: Latin, Cyrillic, Greek and CJK in one
DEFAULT_IMAGE_DPI = 300  # the physical size given to an image that does not say its resolution


@dataclass(frozen=True)
class SourcePage:
    key: str  # the stored input file
    index: int  # its page (PDF) or frame (TIFF)


def build_searchable_pdf(
    fetch: Callable[[str], bytes], sources: list[SourcePage], results: list[PageResult]
) -> bytes:
    """One output page per source page, in order, each with its result's text layer."""
    font = pymupdf.Font(TEXT_FONT)
    out = pymupdf.open()
    inputs: dict[str, pymupdf.Document] = {}
    try:
        for source, result in zip(sources, results, strict=True):
            if source.key not in inputs:
                inputs[source.key] = _open_input(source.key, fetch(source.key))
            page = _place_scan(out, inputs[source.key], source.index)
            if result.status == "succeeded" and result.width and result.height:
                scale = (page.rect.width / result.width, page.rect.height / result.height)
                for block in result.blocks:
                    _write_block(page, font, block, scale)
        out.subset_fonts()  # embed only the glyphs used, not the whole 4 MB font
        return out.tobytes(garbage=3, deflate=True)
    finally:
        for document in inputs.values():
            document.close()
        out.close()
        release_mupdf_store()


def _open_input(key: str, data: bytes) -> pymupdf.Document:
    if key.endswith(".pdf"):
        return pymupdf.open(stream=data, filetype="pdf")
    return _images_as_pdf(data)


def _images_as_pdf(data: bytes) -> pymupdf.Document:
    """Each frame of an image file as a page of its physical size; JPEG and PNG kept as they are."""
    document = pymupdf.open()
    with Image.open(io.BytesIO(data)) as image:
        frames = getattr(image, "n_frames", 1)
        dpi = [float(d) or DEFAULT_IMAGE_DPI for d in image.info.get("dpi", (0, 0))]
        keep_bytes = frames == 1 and image.format in ("JPEG", "PNG")
        for index in range(frames):
            image.seek(index)
            width, height = image.width * 72 / dpi[0], image.height * 72 / dpi[1]
            page = document.new_page(width=width, height=height)
            page.insert_image(page.rect, stream=data if keep_bytes else _png(image))
    return document


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def _place_scan(out: pymupdf.Document, source: pymupdf.Document, index: int) -> pymupdf.Page:
    viewed = source.load_page(index).rect  # after rotation and crop box, as rendered for OCR
    page = out.new_page(width=viewed.width, height=viewed.height)
    page.show_pdf_page(page.rect, source, index)
    return page


def _write_block(
    page: pymupdf.Page, font: pymupdf.Font, block: Block, scale: tuple[float, float]
) -> None:
    """The block's lines share its box, one band each, each stretched to the box's width."""
    lines = _plain_lines(block.text)
    x1, y1, x2, y2 = block.bbox
    box = pymupdf.Rect(x1 * scale[0], y1 * scale[1], x2 * scale[0], y2 * scale[1]) & page.rect
    if not lines or box.is_empty:
        return
    band = box.height / len(lines)
    for n, line in enumerate(lines):
        baseline = pymupdf.Point(box.x0, box.y0 + band * (n + 0.8))
        fontsize = band * 0.9
        writer = pymupdf.TextWriter(page.rect)
        writer.append(baseline, line, font=font, fontsize=fontsize)
        stretch = pymupdf.Matrix(box.width / max(font.text_length(line, fontsize), 1e-3), 1)
        writer.write_text(page, render_mode=3, morph=(baseline, stretch))  # 3: invisible


def _plain_lines(text: str) -> list[str]:
    """What a reader searches for: a table (HTML from the GPU engine) as one line per row, its
    cells separated by spaces; other text line by line; no markup."""
    rows = TABLE_ROW.findall(text)
    if rows:
        cells = [[_plain(cell) for cell in TABLE_CELL.findall(row)] for row in rows]
        lines = [" ".join(c for c in row if c) for row in cells]
    else:
        lines = [_plain(line) for line in text.split("\n")]
    return [line for line in lines if line]


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(TAG.sub(" ", fragment)).split())
