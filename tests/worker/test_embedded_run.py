"""`uocr run`: the main job on the embedded default, as a user runs it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw, ImageFont

from tests.factories import character_error_rate, sample_pages

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
    assert "succeeded: 3 pages (0 failed)" in done.stdout
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


def test_uocr_run_reads_page_images_and_a_page_range(tmp_path: Path) -> None:
    frames = []
    for n in range(1, 4):
        image = Image.new("RGB", (900, 300), "white")
        ImageDraw.Draw(image).text(
            (40, 120), f"Image page number {n}", fill="black", font=ImageFont.load_default(size=40)
        )
        frames.append(image)
    tiff = tmp_path / "scan.tiff"
    buffer = io.BytesIO()
    frames[0].save(buffer, format="TIFF", save_all=True, append_images=frames[1:])
    tiff.write_bytes(buffer.getvalue())
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
