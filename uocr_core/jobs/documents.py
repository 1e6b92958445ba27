"""Inspecting an upload before anything is stored: its type, its pages, whether it is readable."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pymupdf
from PIL import Image

from uocr_core.errors import InvalidDocument, InvalidRequest, UnsupportedMediaType
from uocr_core.mupdf_messages import keep_mupdf_quiet, log_mupdf_messages

# Decided from the bytes, never from the client's Content-Type or file name.
_MAGIC: list[tuple[bytes, str]] = [
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
]
# Containers that may carry "%PDF-" inside their first KB (a polyglot) but are not PDFs: MuPDF
# would "repair" one into a blank page that then "succeeds" with no text.
_NOT_PDF: list[tuple[bytes, str]] = [
    (b"PK\x03\x04", "a ZIP archive (or an Office/ODF file)"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"\xd0\xcf\x11\xe0", "an OLE (old Office) file"),
]
keep_mupdf_quiet()

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "tiff": "image/tiff",
}


@dataclass(frozen=True)
class InspectedFile:
    name: str
    kind: str  # pdf | png | jpeg | tiff
    page_count: int
    data: bytes


def sniff_kind(name: str, data: bytes) -> str:
    if not data:
        raise InvalidDocument(f"{name}: the file is empty")
    head = data[:1024]
    for magic, what in _NOT_PDF:
        if head.startswith(magic):
            raise UnsupportedMediaType(
                f"{name}: unsupported file type: {what}, not a PDF; send a PDF, PNG, JPEG or TIFF"
            )
    for magic, kind in _MAGIC:
        if head.startswith(magic) or (kind == "pdf" and magic in head):
            return kind
    raise UnsupportedMediaType(f"{name}: unsupported file type; send a PDF, PNG, JPEG or TIFF")


def inspect_file(name: str, data: bytes) -> InspectedFile:
    try:
        return _inspect(name, data)
    finally:
        log_mupdf_messages(document=name[:200])


def _inspect(name: str, data: bytes) -> InspectedFile:
    kind = sniff_kind(name, data)
    try:
        doc = pymupdf.open(stream=data, filetype=kind)
    except Exception as error:  # PyMuPDF raises several types for damaged files
        raise InvalidDocument(f"{name}: not a readable {kind.upper()} file ({error})") from None
    with doc:
        if doc.needs_pass or doc.is_encrypted:
            raise InvalidDocument(f"{name}: the PDF is encrypted; remove the password and resend")
        if doc.page_count < 1:
            raise InvalidDocument(f"{name}: the document has no pages")
        _check_pages_load(name, doc)
        if kind == "jpeg":
            _check_jpeg_complete(name, data)
        return InspectedFile(name=name, kind=kind, page_count=doc.page_count, data=data)


def _check_pages_load(name: str, doc: pymupdf.Document) -> None:
    """A truncated PDF opens but fails on its pages; load the first and last to catch it early."""
    for index in {0, doc.page_count - 1}:
        try:
            page = doc.load_page(index)
            page.bound()
        except Exception as error:
            raise InvalidDocument(f"{name}: page {index + 1} cannot be read ({error})") from None


def _check_jpeg_complete(name: str, data: bytes) -> None:
    """MuPDF opens a truncated JPEG and draws its missing part grey, where a truncated PNG or
    TIFF fails to load: read the whole entropy-coded stream (at an eighth of the size, which
    libjpeg decodes without the full inverse transform: ~10 ms for a 300-dpi A4 scan) so a
    cut-off JPEG is refused here, like the others, not read half grey by a worker later."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft("RGB", (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise InvalidDocument(f"{name}: not a readable JPEG file ({error})") from None


def parse_page_selection(spec: str | None, page_count: int) -> list[int]:
    """'1-3,7' -> [1, 2, 3, 7] (1-based, sorted, unique); None selects every page."""
    if spec is None or not spec.strip():
        return list(range(1, page_count + 1))
    selected: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                start_text, end_text = part.split("-", 1)
                start, end = int(start_text), int(end_text)
            else:
                start = end = int(part)
        except ValueError:
            raise InvalidRequest(f"pages: cannot read {part!r}; use a form like '1-3,7'") from None
        if end < start:
            raise InvalidRequest(
                f"pages: range {part!r} is reversed; write it first page first ('{end}-{start}')"
            )
        if start < 1 or end > page_count:
            raise InvalidRequest(
                f"pages: range {part!r} is outside the document's pages 1-{page_count}"
            )
        selected.update(range(start, end + 1))
    return sorted(selected)
