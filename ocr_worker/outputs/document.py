"""The assembled document: every page's result read back in order and written in each format
(JSON, Markdown, text, JSON lines, hOCR, a searchable PDF).

Streamed: the results are read a batch at a time and written page by page to files, the PDF is
built from files on disk, and each file is uploaded from disk, so the assembling worker's
memory is about the same for 3,000 pages as for 300 (bench/service/assembly_bench.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from ocr_worker.outputs.readback import PageRow, read_pages
from ocr_worker.outputs.searchable_pdf import SourcePage, write_searchable_pdf
from ocr_worker.outputs.text_formats import write_text_formats
from uocr_core import object_keys
from uocr_core.models import Job
from uocr_core.storage import ObjectStore
from uocr_core.transient import is_transient

log = structlog.get_logger(__name__)

# Writes the searchable PDF to a path from the source pages and the results' JSON lines file.
PdfWriter = Callable[[list[SourcePage], Path, Path], None]


def write_document(
    store: ObjectStore, job: Job, *, status: str, write_pdf: PdfWriter | None = None
) -> None:
    """The document's result files; `status` is the one the job ends with (written before the
    job is marked finished, so a finished job has it). ``write_pdf`` builds the searchable PDF
    elsewhere (a render process), else it is built here."""
    head = _head(job, status)
    rows = [PageRow(p.page_no, p.result_key, p.status, p.error) for p in job.pages]
    sources = [SourcePage(p.source_key, p.source_index) for p in job.pages]
    with tempfile.TemporaryDirectory(prefix="uocr-document-") as folder:
        files = write_text_formats(Path(folder), head, read_pages(store, rows))
        pdf = Path(folder) / "result.pdf"
        try:
            if write_pdf is None:
                write_searchable_pdf(store.get_file, sources, files["jsonl"], pdf)
            else:
                write_pdf(sources, files["jsonl"], pdf)
            if pdf.exists():  # a document with no page has no PDF
                files["pdf"] = pdf
        except Exception as error:
            # Extra to the text results: if it cannot be built, the job keeps its other results
            # and the API says the PDF is missing; but a dependency that is down fails the
            # completion, which is retried, rather than leave the PDF out for good.
            if is_transient(error):
                raise
            log.exception("result.searchable_pdf_failed", job_id=job.id)
        for fmt, path in files.items():
            key = object_keys.result_key(job.id, fmt)
            store.put_file(key, path, object_keys.result_media_type(fmt))


def _head(job: Job, status: str) -> dict[str, Any]:
    """result.json's own fields; its pages follow them."""
    return {
        "job_id": job.id,
        "status": status,
        "source": job.source_name,
        "pages_total": job.page_count,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "metadata": job.job_metadata,
        "model_version": job.model_version,
        "engine": job.engine,
    }
