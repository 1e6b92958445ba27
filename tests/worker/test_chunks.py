"""Chunks for retrieval (uocr_core/results/chunks.py): they cover the document's Markdown once
and in order, follow its headings, keep tables whole, stay within their size, carry the pages
and boxes they were read from, and a paragraph running across a page break lists both pages.
Then a real scanned document of the accuracy set through ``uocr run``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.accuracy.corpus import CI_DOCUMENTS
from bench.accuracy.runner import scan
from ocr_worker.embedded import run_document
from ocr_worker.outputs.text_formats import write_text_formats
from tests.factories import require_fetched
from uocr_core.contracts import Block, PageResult
from uocr_core.settings import Settings

PAGE_MARKER = re.compile(r"<!-- page \d+ -->")
LONG = " ".join(f"Sentence {n} says something about the archive and its scans." for n in range(60))


def _page(no: int, blocks: list[tuple[str, str]]) -> PageResult:
    """A page whose Markdown is its blocks' text, each block in a band of the page."""
    laid = [
        Block(label=label, bbox=(100, 100 + 80 * n, 900, 160 + 80 * n), text=text)
        for n, (label, text) in enumerate(blocks)
    ]
    markdown = "\n\n".join(("# " + b.text) if b.label == "title" else b.text for b in laid)
    text = "\n".join(b.text for b in laid)
    return PageResult(
        page=no, status="succeeded", width=1000, height=1400, blocks=laid, text=text,
        markdown=markdown,
    )  # fmt: skip


def _written(tmp_path: Path, pages: list[PageResult]) -> tuple[str, list[dict[str, Any]]]:
    files = write_text_formats(tmp_path, {"source": "a.pdf"}, pages)
    markdown = files["markdown"].read_text(encoding="utf-8")
    chunks = [json.loads(line) for line in files["chunks"].read_text(encoding="utf-8").splitlines()]
    return markdown, chunks


def _assert_cover(markdown: str, chunks: list[dict[str, Any]]) -> None:
    """Every character once, in order: the spans never overlap and go forward; between them
    lie only page markers and blank space; each chunk's text is its spans' Markdown."""
    spans = [span for chunk in chunks for span in chunk["spans"]]
    ends, starts = [0] + [s[1] for s in spans], [s[0] for s in spans]
    assert spans == sorted(spans) and all(a <= b for a, b in zip(ends[:-1], starts, strict=True))
    gaps = [markdown[a:b] for a, b in zip(ends[:-1], starts, strict=True)]
    gaps.append(markdown[spans[-1][1] :])
    assert all(not PAGE_MARKER.sub("", gap).strip() for gap in gaps), gaps
    for chunk in chunks:
        pieces = [markdown[a:b] for a, b in chunk["spans"]]
        assert all(pieces) and chunk["text"].startswith(pieces[0])
        assert chunk["text"].endswith(pieces[-1])
        assert chunk["text"].replace(" ", "").replace("\n", "") == "".join(pieces).replace(
            " ", ""
        ).replace("\n", "")


def test_chunks_cover_the_markdown_follow_its_headings_and_keep_tables_whole(
    tmp_path: Path,
) -> None:
    table = "| Option | Meaning |\n| --- | --- |\n" + "\n".join(
        f"| opt{n} | what option {n} does to the archive |" for n in range(60)
    )
    pages = [
        _page(1, [("title", "Scanning"), ("text", "Feed the sheets face down."), ("text", LONG)]),
        _page(2, [("title", "Options"), ("table", table), ("text", "After the table.")]),
    ]
    markdown, chunks = _written(tmp_path, pages)
    _assert_cover(markdown, chunks)
    assert chunks[0]["text"].startswith("# Scanning") and chunks[0]["headings"] == ["Scanning"]
    assert all(c["headings"] == ["Scanning"] for c in chunks if c["pages"] == [1])
    # The long paragraph was cut at sentence ends into chunks within the limit.
    first_page = [c for c in chunks if c["pages"] == [1]]
    assert len(first_page) >= 2 and all(len(c["text"]) <= 1500 for c in first_page)
    assert all(c["text"].rstrip().endswith(".") for c in first_page)
    # The table is one chunk, whole, longer than the limit though it is; under its heading.
    (with_table,) = [c for c in chunks if "| opt0 |" in c["text"]]
    assert table in with_table["text"] and len(with_table["text"]) > 1500
    assert with_table["headings"] == ["Options"] and with_table["pages"] == [2]
    # Each chunk's boxes are those of its blocks, on its pages and inside them.
    for chunk in chunks:
        assert chunk["boxes"] and {box["page"] for box in chunk["boxes"]} <= set(chunk["pages"])
        for box in chunk["boxes"]:
            x1, y1, x2, y2 = box["bbox"]
            assert 0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 1400


def test_a_paragraph_across_a_page_break_is_one_chunk_listing_both_pages(
    tmp_path: Path,
) -> None:
    pages = [
        _page(1, [("text", "The contract runs for five years and may be extended by")]),
        _page(2, [("text", "either party in writing."), ("title", "Payment")]),
    ]
    markdown, chunks = _written(tmp_path, pages)
    _assert_cover(markdown, chunks)
    assert chunks[0]["pages"] == [1, 2]
    assert chunks[0]["text"] == (
        "The contract runs for five years and may be extended by either party in writing."
    )
    assert [box["page"] for box in chunks[0]["boxes"]] == [1, 2]
    assert chunks[1]["headings"] == ["Payment"]


def test_a_failed_page_is_a_chunk_of_its_own_note_and_no_page_is_dropped(
    tmp_path: Path,
) -> None:
    pages = [
        _page(1, [("text", "First page.")]),
        PageResult(page=2, status="failed", error="page 2 of the PDF is damaged"),
        _page(3, [("text", "Third page.")]),
    ]
    markdown, chunks = _written(tmp_path, pages)
    _assert_cover(markdown, chunks)
    assert "page 2 failed: page 2 of the PDF is damaged" in "".join(c["text"] for c in chunks)
    assert {p for c in chunks for p in c["pages"]} == {1, 2, 3}


def test_a_real_scanned_document_read_by_uocr_run_is_chunked_with_its_boxes(
    tmp_path: Path,
) -> None:
    source = CI_DOCUMENTS[0]  # r-admin: English prose, headings, shell commands
    require_fetched(source)
    (tmp_path / "scan.pdf").write_bytes(scan(source).pdf)
    run_document(tmp_path / "scan.pdf", tmp_path / "out", Settings())
    markdown = (tmp_path / "out" / "result.md").read_text(encoding="utf-8")
    lines = (tmp_path / "out" / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
    chunks = [json.loads(line) for line in lines]
    _assert_cover(markdown, chunks)
    assert {p for c in chunks for p in c["pages"]} == {1, 2, 3}
    pages = {
        r["page"]: r
        for r in map(json.loads, (tmp_path / "out" / "pages.jsonl").read_text().splitlines())
    }
    for chunk in chunks:
        assert chunk["boxes"], chunk["text"][:80]
        for box in chunk["boxes"]:
            x1, y1, x2, y2 = box["bbox"]
            page = pages[box["page"]]
            assert 0 <= x1 < x2 <= page["width"] and 0 <= y1 < y2 <= page["height"]
    assert any(chunk["headings"] for chunk in chunks)  # the manual's sections


def test_the_heading_path_follows_the_outline_whatever_levels_a_document_skips(
    tmp_path: Path,
) -> None:
    def heading(level: int, text: str) -> str:
        return "#" * level + " " + text

    body = "\n\n".join(
        [heading(2, "Install"), "a", heading(3, "Debian"), "b", heading(2, "Usage"), "c"]
        + [heading(4, "Deep"), "d", heading(2, "Licence"), "e"]
    )
    page = PageResult(page=1, status="succeeded", width=1000, height=1400, markdown=body)
    _, chunks = _written(tmp_path, [page])
    assert [(c["text"][-1], c["headings"]) for c in chunks] == [
        ("a", ["Install"]),
        ("b", ["Install", "Debian"]),
        ("c", ["Usage"]),
        ("d", ["Usage", "Deep"]),
        ("e", ["Licence"]),
    ]


def test_chinese_is_cut_at_its_full_stops_and_runs_on_across_a_page_break(
    tmp_path: Path,
) -> None:
    sentence = "这是一个关于档案扫描和文字识别的句子，用来检查分块。"  # 26 characters
    long = sentence * 80  # 2,080 characters, no spaces at all
    pages = [
        _page(1, [("text", long), ("text", "合同的期限为五年，双方可以")]),
        _page(2, [("text", "书面延长。"), ("text", "下一段。")]),
    ]
    markdown, chunks = _written(tmp_path, pages)
    _assert_cover(markdown, chunks)
    cut = [c for c in chunks if sentence in c["text"]]  # the long paragraph, in parts
    assert len(cut) >= 2 and len(cut[0]["text"]) <= 1500 and cut[0]["text"].endswith("。")
    assert cut[1]["text"].startswith(sentence)  # cut between two sentences, not inside one
    (across,) = [c for c in chunks if c["pages"] == [1, 2]]
    assert "合同的期限为五年，双方可以 书面延长。" in across["text"]
