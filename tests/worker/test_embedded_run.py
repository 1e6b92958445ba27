"""`uocr run`: the main job on the embedded default, as a user runs it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageDraw, ImageFont
from tokenizers import Tokenizer

from ocr_worker.embedded import run_document
from tests.factories import bpe_tokenizer, character_error_rate, sample_pages, scanned_pdf
from uocr_core.settings import load_settings

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pdf"
UOCR = str(Path(sys.executable).with_name("uocr"))  # the console script of this environment


def test_uocr_run_writes_ordered_results_for_the_shipped_sample(tmp_path: Path) -> None:
    done = subprocess.run(
        [UOCR, "run", str(SAMPLE), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "succeeded: 3 pages (0 failed, 0 flagged)" in done.stdout
    lines = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert [line["page"] for line in lines] == [1, 2, 3]
    assert set(lines[0]) >= {"page", "status", "text", "markdown", "blocks"}
    for expected, line in zip(sample_pages(3), lines, strict=True):  # the sample's known text
        assert character_error_rate("\n".join(expected), line["text"]) < 0.05
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["pages"] == lines  # the service's result has the same shape
    assert (tmp_path / "result.md").read_text().count("<!-- page") == 3
    with pymupdf.open(tmp_path / "result.pdf") as searchable:  # the scans, now searchable
        assert searchable.page_count == 3 and all(page.get_images() for page in searchable)
        for expected, page in zip(sample_pages(3), searchable, strict=True):
            assert character_error_rate("\n".join(expected), page.get_text()) < 0.05
    hocr = ET.parse(tmp_path / "result.hocr").getroot()
    assert len(hocr.findall(".//{*}div[@class='ocr_page']")) == 3


def _numbered_tiff(path: Path, pages: int) -> Path:
    frames = []
    for n in range(1, pages + 1):
        image = Image.new("RGB", (900, 300), "white")
        ImageDraw.Draw(image).text(
            (40, 120), f"Image page number {n}", fill="black", font=ImageFont.load_default(size=40)
        )
        frames.append(image)
    buffer = io.BytesIO()
    frames[0].save(buffer, format="TIFF", save_all=True, append_images=frames[1:])
    path.write_bytes(buffer.getvalue())
    return path


def test_uocr_run_reads_page_images_and_a_page_range(tmp_path: Path) -> None:
    tiff = _numbered_tiff(tmp_path / "scan.tiff", 3)
    out = tmp_path / "out"
    done = subprocess.run(
        [UOCR, "run", str(tiff), "--out", str(out), "--pages", "2-3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert [line["page"] for line in lines] == [2, 3]
    assert [line["text"] for line in lines] == ["Image page number 2", "Image page number 3"]
    with pymupdf.open(out / "result.pdf") as searchable:
        assert [page.get_text().strip() for page in searchable] == [
            "Image page number 2",
            "Image page number 3",
        ]


def test_uocr_run_explains_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a document")
    done = subprocess.run(
        [UOCR, "run", str(bad), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "unsupported file type" in done.stderr


def test_progress_moves_page_by_page_not_group_by_group(tmp_path: Path) -> None:
    """Groups of 3 pages (overlap 1) over 5 pages: the bar still steps 1, 2, 3, 4, 5."""
    tiff = _numbered_tiff(tmp_path / "scan.tiff", 5)
    reports: list[tuple[int, int]] = []
    settings = load_settings(page_group_size=3, page_group_overlap=1)
    job = run_document(
        tiff, tmp_path / "out", settings, on_progress=lambda d, t: reports.append((d, t))
    )
    assert job.status == "succeeded"
    assert {total for _, total in reports} == {5}
    done = [d for d, _ in reports]
    assert done == sorted(done)  # never goes back
    assert list(dict.fromkeys(done)) == [0, 1, 2, 3, 4, 5]  # every page a step of its own


def _uocr_run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([UOCR, "run", *args], capture_output=True, text=True, timeout=timeout)


def test_a_reversed_page_range_says_so(tmp_path: Path) -> None:
    done = _uocr_run(str(SAMPLE), "--out", str(tmp_path / "o"), "--pages", "3-2")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: pages: range '3-2' is reversed; write it first page first ('2-3')"
    )
    assert "Traceback" not in done.stderr


def test_an_out_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    done = _uocr_run(str(SAMPLE), "--out", str(in_the_way / "results"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: cannot write --out {in_the_way / 'results'}: Not a directory"
    ]


def test_a_blank_sheet_in_a_scan_is_flagged_and_the_job_says_so(tmp_path: Path) -> None:
    """A real box holds separator sheets: scanned blank (grey paper, noise, JPEG), the page
    comes back with no text. It is read, but flagged, and the job counts it: not a clean
    success that hides a page which may have been skipped."""
    pages = sample_pages(2, lines=3)
    with_blank = pymupdf.open(stream=scanned_pdf([pages[0], [" "], pages[1]], seed=4))
    path = tmp_path / "letters.pdf"
    with_blank.save(path)
    done = _uocr_run(str(path), "--out", str(tmp_path / "out"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "succeeded: 3 pages (0 failed, 1 flagged)" in done.stdout
    document = json.loads((tmp_path / "out" / "result.json").read_text())
    assert document["pages_flagged"] == 1
    assert [page["warnings"] for page in document["pages"]] == [[], ["empty_page"], []]


def test_sheets_fed_upside_down_and_sideways_come_back_upright_and_searchable(
    tmp_path: Path,
) -> None:
    """The sample's pages as a feeder turns them: the second upside down, the third sideways.
    Each is read upright, and the searchable PDF shows it upright with its text layer on its
    words (the first line, "Page N of the archive", at the top left)."""
    fed = pymupdf.open()
    with pymupdf.open(SAMPLE) as sample:
        for index, turn in enumerate((0, 180, 90)):
            pix = sample[index].get_pixmap(dpi=150)
            image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples).rotate(
                turn, expand=True
            )
            buffer = io.BytesIO()
            image.save(buffer, format="JPEG", quality=80)
            page = fed.new_page(width=image.width * 72 / 150, height=image.height * 72 / 150)
            page.insert_image(page.rect, stream=buffer.getvalue())
    path = tmp_path / "fed.pdf"
    fed.save(path)
    done = _uocr_run(str(path), "--out", str(tmp_path / "out"), timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [
        json.loads(line) for line in (tmp_path / "out" / "pages.jsonl").read_text().splitlines()
    ]
    assert [line["rotation"] for line in lines] == [0, 180, 90]
    for expected, line in zip(sample_pages(3), lines, strict=True):
        assert character_error_rate("\n".join(expected), line["text"]) < 0.05
    with pymupdf.open(tmp_path / "out" / "result.pdf") as searchable:
        for number, page in enumerate(searchable, start=1):
            assert page.rect.height > page.rect.width  # portrait, as the sheet was printed
            first = next(w for w in page.get_text("words") if w[4] == "Page")
            assert first[1] < page.rect.height * 0.15 and first[0] < page.rect.width * 0.3
            ink = np.frombuffer(
                page.get_pixmap(dpi=30, colorspace=pymupdf.csGRAY).samples, np.uint8
            )
            top, bottom = ink[: ink.size // 2], ink[ink.size // 2 :]
            assert top.mean() < bottom.mean(), number  # the text is at the top: upright


def test_uocr_run_sizes_chunks_in_a_tokenizers_tokens_and_refuses_a_bad_ask(
    tmp_path: Path,
) -> None:
    """``--chunk-tokens N --tokenizer tokenizer.json``: chunks.jsonl cut again at that many of
    its tokens, covering every page; a wrong mix of options is one line before any OCR."""
    texts = [" ".join(lines) for lines in sample_pages(3)] * 10
    tokenizer = bpe_tokenizer(tmp_path / "tokenizer.json", texts)
    out = tmp_path / "out"
    done = _uocr_run(
        str(SAMPLE), "--out", str(out), "--chunk-tokens", "20", "--tokenizer", str(tokenizer)
    )
    assert done.returncode == 0, done.stderr
    chunks = [json.loads(line) for line in (out / "chunks.jsonl").read_text().splitlines()]
    counted = Tokenizer.from_file(str(tokenizer))
    sizes = [len(counted.encode(c["text"], add_special_tokens=False).ids) for c in chunks]
    assert max(sizes) <= 20 and len(chunks) > 3, sizes
    assert sorted({p for c in chunks for p in c["pages"]}) == [1, 2, 3]

    for args, says in (
        (["--chunk-tokens", "20"], "--chunk-tokens and --tokenizer go together"),
        (["--chunk-chars", "400", "--tokenizer", str(tokenizer)], "not both"),
        (["--chunk-tokens", "20", "--tokenizer", str(SAMPLE)], "cannot be read"),
    ):
        refused = _uocr_run(str(SAMPLE), "--out", str(tmp_path / "o"), *args)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert says in refused.stderr.strip().splitlines()[-1], refused.stderr
