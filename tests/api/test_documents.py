from __future__ import annotations

import io

import pymupdf
import pytest
from PIL import Image

from uocr_core.errors import InvalidDocument, InvalidRequest, UnsupportedMediaType
from uocr_core.jobs.documents import inspect_file, parse_page_selection


def _tiff(frames: int) -> bytes:
    images = [Image.new("RGB", (64, 64), (i * 40, 0, 0)) for i in range(frames)]
    buffer = io.BytesIO()
    images[0].save(buffer, format="TIFF", save_all=True, append_images=images[1:])
    return buffer.getvalue()


def test_types_are_decided_from_the_bytes_not_the_name() -> None:
    doc = pymupdf.open()
    doc.new_page()
    assert inspect_file("scan.png", doc.tobytes()).kind == "pdf"
    assert inspect_file("x.bin", _tiff(3)).page_count == 3


def test_a_truncated_pdf_names_the_problem() -> None:
    doc = pymupdf.open()
    for _ in range(3):
        doc.new_page().insert_text((50, 50), "x" * 200)
    with pytest.raises(InvalidDocument, match="report.pdf"):
        inspect_file("report.pdf", doc.tobytes()[:300])


def _scan(fmt: str) -> bytes:
    """A scan-sized photo of noise: every part of it is data a reader needs."""
    buffer = io.BytesIO()
    Image.effect_noise((600, 800), 60).convert("RGB").save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "TIFF"])
def test_a_truncated_image_of_any_type_is_refused_at_upload(fmt: str) -> None:
    whole = _scan(fmt)
    assert inspect_file(f"scan.{fmt.lower()}", whole).page_count == 1
    for cut in (len(whole) // 2, len(whole) - 16):  # half of it; only its last bytes
        with pytest.raises(InvalidDocument, match=f"scan.{fmt.lower()}"):
            inspect_file(f"scan.{fmt.lower()}", whole[:cut])


def test_unsupported_and_empty_files_are_refused() -> None:
    with pytest.raises(UnsupportedMediaType, match="PDF, PNG, JPEG or TIFF"):
        inspect_file("notes.txt", b"hello")
    with pytest.raises(InvalidDocument, match="empty"):
        inspect_file("blank.pdf", b"")


@pytest.mark.parametrize(
    ("spec", "pages"),
    [(None, [1, 2, 3, 4, 5]), ("2", [2]), ("1-3,5", [1, 2, 3, 5]), ("3-4, 4-5", [3, 4, 5])],
)
def test_page_selection(spec: str | None, pages: list[int]) -> None:
    assert parse_page_selection(spec, 5) == pages


@pytest.mark.parametrize("spec", ["0", "4-2", "1-9", "a-b"])
def test_bad_page_selection_is_explained(spec: str) -> None:
    with pytest.raises(InvalidRequest, match="pages"):
        parse_page_selection(spec, 5)
