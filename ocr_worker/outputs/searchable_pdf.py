"""The searchable PDF: every page's original scan, with the text read from it laid invisibly over
it where it was read, so a PDF reader can search, select and copy what the page shows.

Pages are placed as they are viewed (rotation and crop box applied), so the boxes the engines
give in rendered-page pixels map onto them by one scale. A page that failed or was canceled
keeps its scan and carries no text: no page is dropped.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image

from ocr_worker.imaging import process_store, release_mupdf_store
from ocr_worker.outputs.text_layer import placed_lines
from uocr_core.contracts import Block, PageResult

TEXT_FONT = "cjk"  # MuPDF's built-in Droid Sans Fallback: Latin, Cyrillic, Greek and CJK in one
DEFAULT_IMAGE_DPI = 300  # the physical size given to an image that does not say its resolution
# A long document's PDF is built this many pages at a time, each part appended to the file: the
# worker holds one part, not the book (bench/service/assembly_bench.py).
PART_PAGES = 200


@dataclass(frozen=True)
class SourcePage:
    key: str  # the stored input file
    index: int  # its page (PDF) or frame (TIFF)


def build_searchable_pdf(
    fetch: Callable[[str], bytes], sources: list[SourcePage], results: Iterable[PageResult]
) -> bytes:
    """One output page per source page, in order, each with its result's text layer."""
    inputs: dict[str, pymupdf.Document] = {}
    try:

        def opened(key: str) -> pymupdf.Document:
            if key not in inputs:
                inputs[key] = _open_input(key, fetch(key))
            return inputs[key]

        with _layered(opened, zip(sources, results, strict=True)) as out:
            return out.tobytes(garbage=3, deflate=True)
    finally:
        for document in inputs.values():
            document.close()


def write_searchable_pdf(
    download: Callable[[str, Path], None],
    sources: list[SourcePage],
    results_jsonl: Path,
    out_path: Path,
) -> None:
    """``build_searchable_pdf`` from files: each input downloaded beside ``out_path`` and read
    from disk (a 3,000-page scan is never held in memory), the results read line by line from
    the JSON lines file the text formats wrote, and the PDF written to ``out_path`` a part of
    ``PART_PAGES`` pages at a time."""
    inputs: dict[str, pymupdf.Document] = {}
    try:

        def opened(key: str) -> pymupdf.Document:
            if key not in inputs:
                path = out_path.with_name(f"input-{len(inputs)}{Path(key).suffix}")
                download(key, path)
                inputs[key] = (
                    pymupdf.open(path)
                    if key.endswith(".pdf")
                    else _images_as_pdf(path.read_bytes())
                )
            return inputs[key]

        with results_jsonl.open(encoding="utf-8") as lines:
            results = (PageResult.model_validate_json(line) for line in lines)
            pairs = zip(sources, results, strict=True)
            while part := list(itertools.islice(pairs, PART_PAGES)):
                _append(out_path, _part(opened, part))
    finally:
        for document in inputs.values():
            document.close()


def write_in_render_process(sources: list[SourcePage], results_jsonl: Path, out_path: Path) -> None:
    """``write_searchable_pdf`` in a ProcessRasterizer's process (``ProcessRasterizer.call``):
    PyMuPDF holds the GIL throughout, ~15 ms a page, which in a GPU worker's process stalls
    the decode loop and every task thread (bench/service/gil_bench.py). Only paths cross."""
    write_searchable_pdf(process_store().get_file, sources, results_jsonl, out_path)


def _part(
    opened: Callable[[str], pymupdf.Document], pairs: list[tuple[SourcePage, PageResult]]
) -> bytes:
    with _layered(opened, pairs) as out:
        return out.tobytes(garbage=3, deflate=True)


def _append(path: Path, part: bytes) -> None:
    """The part's pages added to the PDF at ``path`` by an incremental save (appended to the
    file): the whole document is never in memory, and each part costs the same."""
    if not path.exists():
        path.write_bytes(part)
        return
    with pymupdf.open(path) as whole, pymupdf.open(stream=part, filetype="pdf") as pages:
        whole.insert_pdf(pages)
        whole.saveIncr()


@contextmanager
def _layered(
    opened: Callable[[str], pymupdf.Document], pairs: Iterable[tuple[SourcePage, PageResult]]
) -> Iterator[pymupdf.Document]:
    """The output document: each source page placed, its result's text laid over it."""
    font = pymupdf.Font(TEXT_FONT)
    out = pymupdf.open()
    try:
        for source, result in pairs:
            page = _place_scan(out, opened(source.key), source.index, result.rotation)
            if result.status == "succeeded" and result.width and result.height:
                for block in result.blocks:
                    _write_block(page, font, block, (result.width, result.height))
        out.subset_fonts()  # embed only the glyphs used, not the whole 4 MB font
        yield out
    finally:
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


def _place_scan(
    out: pymupdf.Document, source: pymupdf.Document, index: int, rotation: int = 0
) -> pymupdf.Page:
    """The scan as it was read: turned upright (``rotation`` degrees clockwise) when it was fed
    upside down or sideways, so that the text layer, in the upright page's geometry, lies on
    its words and the reader sees the page the right way up."""
    viewed = source.load_page(index).rect  # after rotation and crop box, as rendered for OCR
    width, height = viewed.width, viewed.height
    if rotation % 180:
        width, height = height, width
    page = out.new_page(width=width, height=height)
    page.show_pdf_page(page.rect, source, index, rotate=-rotation)  # PyMuPDF's: anticlockwise
    return page


def _write_block(
    page: pymupdf.Page, font: pymupdf.Font, block: Block, size: tuple[int, int]
) -> None:
    """Each line invisibly in its band of the block's box, stretched to the box's width."""
    sx, sy = page.rect.width / size[0], page.rect.height / size[1]
    for line in placed_lines(block, *size):
        x1, y1, x2, y2 = line.bbox
        box = pymupdf.Rect(x1 * sx, y1 * sy, x2 * sx, y2 * sy)
        baseline = pymupdf.Point(box.x0, box.y0 + box.height * 0.8)
        fontsize = box.height * 0.9
        writer = pymupdf.TextWriter(page.rect)
        writer.append(baseline, line.text, font=font, fontsize=fontsize)
        stretch = pymupdf.Matrix(box.width / max(font.text_length(line.text, fontsize), 1e-3), 1)
        writer.write_text(page, render_mode=3, morph=(baseline, stretch))  # 3: invisible
