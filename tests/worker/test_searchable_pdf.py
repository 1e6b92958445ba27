"""The searchable PDF: the scans kept, the text findable where the page shows it."""

from __future__ import annotations

import io

import pymupdf
from PIL import Image

from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
from uocr_core.contracts import Block, PageResult


def _scan_pdf(pages: int, *, rotate: int = 0) -> bytes:
    """Image-only pages (as a scanner writes them), 595 x 842 pt."""
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=595, height=842)
        pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 100, 140), False)
        pix.set_rect(pix.irect, (240 - n, 240, 230))
        page.insert_image(page.rect, pixmap=pix)
        page.set_rotation(rotate)
    return doc.tobytes()


def _result(page: int, blocks: list[Block], size: tuple[int, int]) -> PageResult:
    return PageResult(page=page, status="succeeded", blocks=blocks, width=size[0], height=size[1])


def _words(page: pymupdf.Page) -> list[tuple[str, pymupdf.Rect]]:
    return [(w[4], pymupdf.Rect(w[:4])) for w in page.get_text("words")]


def test_each_scan_is_kept_and_its_text_lies_where_it_was_read() -> None:
    # Rendered at 150 dpi, a 595 x 842 pt page is 1240 x 1754 px: boxes scale by 72/150.
    size = (1240, 1754)
    results = [
        _result(
            1,
            [Block(label="text", bbox=(150, 300, 950, 400), text="Invoice 2026-12\nPaid in full")],
            size,
        ),
        _result(2, [Block(label="title", bbox=(100, 100, 700, 160), text="第二章 Contract")], size),
        PageResult(page=3, status="failed", error="the model produced no section for this page"),
    ]
    sources = [SourcePage("in/000.pdf", n) for n in range(3)]
    data = build_searchable_pdf(lambda key: _scan_pdf(3), sources, results)

    with pymupdf.open(stream=data, filetype="pdf") as doc:
        assert doc.page_count == 3  # the failed page too
        assert all(page.get_images() or page.get_xobjects() for page in doc)  # scans kept
        first = _words(doc[0])
        assert [w for w, _ in first] == ["Invoice", "2026-12", "Paid", "in", "full"]
        box = pymupdf.Rect(150, 300, 950, 400) * (72 / 150)
        assert all(box + (-2, -2, 2, 2) in rect or rect.intersects(box) for _, rect in first)
        centre = [(rect.y0 + rect.y1) / 2 for _, rect in first]
        assert box.y0 < centre[0] < (box.y0 + box.y1) / 2 < centre[2] < box.y1  # one band each
        assert doc[1].get_text().split() == ["第二章", "Contract"]
        assert doc[2].get_text().strip() == ""
        assert doc.search_page_for(0, "Paid in full")  # what a reader's search finds


def test_a_table_is_searchable_row_by_row_without_its_markup() -> None:
    table = (
        "<table><tr><th>Item</th><th>Price</th></tr>"
        "<tr><td>Paper &amp; ink</td><td>12.50</td></tr></table>"
    )
    block = Block(label="table", bbox=(100, 100, 1100, 300), text=table)
    data = build_searchable_pdf(
        lambda key: _scan_pdf(1), [SourcePage("in/000.pdf", 0)], [_result(1, [block], (1240, 1754))]
    )
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        lines = [line for line in doc[0].get_text().splitlines() if line]
        assert lines == ["Item Price", "Paper & ink 12.50"]


def test_a_rotated_scan_gets_its_text_in_the_orientation_it_was_read() -> None:
    # Rotated 90°, the page is viewed (and rendered for OCR) landscape: 1754 x 1240 px.
    block = Block(label="text", bbox=(100, 100, 1000, 200), text="Landscape table heading")
    data = build_searchable_pdf(
        lambda key: _scan_pdf(1, rotate=90),
        [SourcePage("in/000.pdf", 0)],
        [_result(1, [block], (1754, 1240))],
    )
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        page = doc[0]
        assert (round(page.rect.width), round(page.rect.height)) == (842, 595)
        words = _words(page)
        assert [w for w, _ in words] == ["Landscape", "table", "heading"]
        expected = pymupdf.Rect(100, 100, 1000, 200) * (72 / 150)
        union = words[0][1] | words[-1][1]
        assert abs(union.x0 - expected.x0) < 3 and abs(union.x1 - expected.x1) < 6
        assert abs((union.y0 + union.y1) / 2 - (expected.y0 + expected.y1) / 2) < 4


def test_image_inputs_become_pages_of_their_physical_size() -> None:
    frames = [Image.new("RGB", (600, 300), (255, 255, 255)) for _ in range(2)]
    tiff = io.BytesIO()
    frames[0].save(tiff, format="TIFF", save_all=True, append_images=frames[1:], dpi=(200, 200))
    png = io.BytesIO()
    frames[0].save(png, format="PNG")
    files = {"in/000.tiff": tiff.getvalue(), "in/001.png": png.getvalue()}
    block = Block(label="text", bbox=(60, 60, 540, 120), text="frame text")
    sources = [
        SourcePage("in/000.tiff", 0),
        SourcePage("in/000.tiff", 1),
        SourcePage("in/001.png", 0),
    ]
    results = [_result(n + 1, [block], (600, 300)) for n in range(3)]
    data = build_searchable_pdf(files.__getitem__, sources, results)
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        sizes = [(round(p.rect.width), round(p.rect.height)) for p in doc]
        assert sizes == [(216, 108), (216, 108), (144, 72)]  # 200 dpi; no dpi: 300
        assert all(p.get_text().split() == ["frame", "text"] for p in doc)
