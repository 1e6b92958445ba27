"""The assembled document: every page's result read back in order and written in each format
(JSON, Markdown, text, JSON lines, hOCR, a searchable PDF)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

import structlog

from ocr_worker.outputs.hocr import build_hocr
from ocr_worker.outputs.pages import store_calls
from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
from uocr_core import object_keys
from uocr_core.contracts import PageResult
from uocr_core.models import Job
from uocr_core.storage import ObjectNotFound, ObjectStore
from uocr_core.transient import is_transient

log = structlog.get_logger(__name__)


def load_page_results(store: ObjectStore, job: Job) -> list[PageResult]:
    """Every page in document order; a page never run is listed as such, never dropped."""

    def load(page: _PageRow) -> PageResult:
        try:
            if page.result_key is None:
                raise ObjectNotFound(page.page_no)
            return PageResult.model_validate_json(store.get(page.result_key))
        except ObjectNotFound:
            return (
                PageResult(page=page.page_no, status="failed", error=page.error or "not processed")
                if page.status == "failed"
                else PageResult(page=page.page_no, status="canceled")
            )

    # Read from the rows here: the pool's threads must not touch the session.
    pages = [_PageRow(p.page_no, p.result_key, p.status, p.error) for p in job.pages]
    with store_calls(len(pages)) as pool:
        return list(pool.map(load, pages))


class _PageRow(NamedTuple):
    page_no: int
    result_key: str | None
    status: str
    error: str | None


def document_files(job: Job, results: list[PageResult], status: str) -> dict[str, str]:
    """The assembled result in its text shapes (JSON, Markdown, text, JSON lines, hOCR), keyed
    by format name; `status` is the one the job ends with (written before the job is marked
    finished, so a finished job has it)."""
    document = {
        "job_id": job.id,
        "status": status,
        "source": job.source_name,
        "pages_total": job.page_count,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "metadata": job.job_metadata,
        "model_version": job.model_version,
        "engine": job.engine,
        "pages": [r.to_jsonl_obj() for r in results],
    }
    markdown = "\n\n".join(
        f"<!-- page {r.page} -->\n\n"
        + (
            r.markdown
            if r.status == "succeeded"
            else f"> page {r.page} {r.status}: {r.error or ''}"
        )
        for r in results
    )
    text = "\n\f".join(r.text for r in results)  # form feed between pages, as pdftotext does
    return {
        "json": json.dumps(document, ensure_ascii=False, indent=1),
        "markdown": markdown + "\n",
        "text": text + "\n",
        "jsonl": "".join(json.dumps(r.to_jsonl_obj(), ensure_ascii=False) + "\n" for r in results),
        "hocr": build_hocr(job.source_name, results),
    }


# Builds the searchable PDF's bytes from the source pages and their results.
PdfBuilder = Callable[[list[SourcePage], list[PageResult]], bytes]


def write_document(
    store: ObjectStore, job: Job, *, status: str, build_pdf: PdfBuilder | None = None
) -> None:
    """The document's result files; ``build_pdf`` builds the searchable PDF elsewhere (a render
    process), else it is built here."""
    results = load_page_results(store, job)
    files: dict[str, bytes] = {
        fmt: content.encode() for fmt, content in document_files(job, results, status).items()
    }
    pdf = searchable_pdf(store, job, results, build_pdf)
    if pdf is not None:
        files["pdf"] = pdf
    for fmt, data in files.items():
        store.put(object_keys.result_key(job.id, fmt), data, object_keys.result_media_type(fmt))


def searchable_pdf(
    store: ObjectStore, job: Job, results: list[PageResult], build_pdf: PdfBuilder | None = None
) -> bytes | None:
    """The scans with their text layer. Extra to the text results: if it cannot be built, the
    job keeps its other results and the API says the PDF is missing (but a dependency that is
    down fails the completion, which is retried, rather than leave the PDF out for good)."""
    sources = [SourcePage(page.source_key, page.source_index) for page in job.pages]
    try:
        if build_pdf is None:
            return build_searchable_pdf(store.get, sources, results)
        return build_pdf(sources, results)
    except Exception as error:
        if is_transient(error):  # the store is down, not the PDF: the completion is retried
            raise
        log.exception("result.searchable_pdf_failed", job_id=job.id)
        return None
