"""hOCR: well-formed XHTML that hOCR readers parse, every page in order, lines and words with
boxes inside their page, text escaped, failed pages kept."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ocr_worker.outputs.hocr import build_hocr
from uocr_core.contracts import Block, PageResult

NS = {"x": "http://www.w3.org/1999/xhtml"}


def _bbox(element: ET.Element) -> tuple[int, ...]:
    part = next(p for p in element.attrib["title"].split(";") if p.strip().startswith("bbox"))
    return tuple(int(v) for v in part.split()[1:])


def _pages() -> list[PageResult]:
    return [
        PageResult(
            page=1,
            status="succeeded",
            width=1000,
            height=1400,
            blocks=[
                Block(label="title", bbox=(100, 100, 900, 160), text="Annual <Report> & Notes"),
                Block(
                    label="text",
                    bbox=(100, 200, 700, 300),
                    text="first line here\nsecond line",
                    confidence=0.91,
                ),
                Block(
                    label="table",
                    bbox=(100, 400, 800, 500),
                    text="<table><tr><td>Year</td><td>Total</td></tr>"
                    "<tr><td>2025</td><td>1,204</td></tr></table>",
                ),
            ],
        ),
        PageResult(page=2, status="failed", error="OCR failed: bad -- stream -"),
        PageResult(page=3, status="succeeded", width=800, height=600, blocks=[]),
    ]


def test_every_page_in_order_with_lines_and_words_in_their_boxes() -> None:
    root = ET.fromstring(build_hocr("contract.pdf", _pages()))  # well-formed, or this raises
    assert root.find("x:head/x:title", NS).text == "contract.pdf"  # type: ignore[union-attr]
    pages = root.findall(".//x:div[@class='ocr_page']", NS)
    assert [p.attrib["id"] for p in pages] == ["page_1", "page_2", "page_3"]
    assert [p.attrib["title"].split("ppageno ")[1] for p in pages] == ["0", "1", "2"]
    assert _bbox(pages[0]) == (0, 0, 1000, 1400)

    lines = pages[0].findall(".//x:span[@class='ocr_line']", NS)
    texts = [" ".join(w.text or "" for w in line) for line in lines]
    assert texts == [
        "Annual <Report> & Notes",  # escaped in the file, itself once parsed
        "first line here",
        "second line",
        "Year Total",  # a table: one line per row
        "2025 1,204",
    ]
    first, second = (_bbox(line) for line in lines[1:3])
    assert first == (100, 200, 700, 250) and second == (100, 250, 700, 300)  # bands of the block
    for line in lines:
        lx1, ly1, lx2, ly2 = _bbox(line)
        previous_right = lx1
        for word in line:
            x1, y1, x2, y2 = _bbox(word)
            assert previous_right <= x1 < x2 <= lx2 and (y1, y2) == (ly1, ly2)
            previous_right = x2
    confident = lines[1].find("x:span", NS)
    assert confident is not None and "x_wconf 91" in confident.attrib["title"]


def test_a_failed_page_is_listed_empty_with_its_reason() -> None:
    text = build_hocr("d.pdf", _pages())
    root = ET.fromstring(text)
    failed = root.find(".//x:div[@id='page_2']", NS)
    assert failed is not None and len(failed) == 0 and "bbox" not in failed.attrib["title"]
    assert "page 2 failed: OCR failed: bad - - stream -" in text
    empty = root.find(".//x:div[@id='page_3']", NS)
    assert empty is not None and _bbox(empty) == (0, 0, 800, 600) and len(empty) == 0
