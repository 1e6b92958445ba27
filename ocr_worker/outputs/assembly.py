"""Writing what clients read: per-page objects, the progress object, the assembled document."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import structlog

from ocr_worker.outputs.hocr import build_hocr
from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
from uocr_core import object_keys
from uocr_core.contracts import PageResult
from uocr_core.job_lifecycle import GROUP_FINISHED
from uocr_core.models import Job
from uocr_core.storage import ObjectNotFound, ObjectStore
from uocr_core.transient import is_transient

log = structlog.get_logger(__name__)


# A group's page objects are written, and a document's read back, this many at a time: one
# after another, each round trip to the store sat between a group's decode and its document's
# next group (python -m bench.service.store_bench).
STORE_CALLS_AT_ONCE = 8


def write_page(store: ObjectStore, job_id: str, result: PageResult) -> str:
    key = object_keys.page_result_key(job_id, result.page)
    store.put(key, result.model_dump_json().encode(), "application/json")
    return key


def write_pages(store: ObjectStore, job_id: str, results: list[PageResult]) -> dict[int, str]:
    """Each page's object key, every page written (the first failure is raised)."""
    with _calls(len(results)) as pool:
        keys = list(pool.map(lambda result: write_page(store, job_id, result), results))
    return {result.page: key for result, key in zip(results, keys, strict=True)}


def write_progress(store: ObjectStore, job: Job) -> None:
    progress = {
        "job_id": job.id,
        "status": job.status,
        "pages_total": job.page_count,
        "pages_done": job.pages_done,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "groups_total": len(job.groups),
        "groups_done": sum(g.status in GROUP_FINISHED for g in job.groups),
        "pages": [{"page": p.page_no, "status": p.status} for p in job.pages],
    }
    store.put(object_keys.progress_key(job.id), json.dumps(progress).encode(), "application/json")


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
    with _calls(len(pages)) as pool:
        return list(pool.map(load, pages))


class _PageRow(NamedTuple):
    page_no: int
    result_key: str | None
    status: str
    error: str | None


def _calls(count: int) -> ThreadPoolExecutor:
    """Threads for one batch of store calls (made per batch: a pool made at import would not
    survive a prefork worker's fork)."""
    return ThreadPoolExecutor(max(1, min(STORE_CALLS_AT_ONCE, count)), "store-calls")


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
    for fmt, content in document_files(job, results, status).items():
        store.put(
            object_keys.result_key(job.id, fmt),
            content.encode(),
            object_keys.result_media_type(fmt),
        )
    write_searchable_pdf(store, job, results, build_pdf)


def write_searchable_pdf(
    store: ObjectStore, job: Job, results: list[PageResult], build_pdf: PdfBuilder | None = None
) -> None:
    """The scans with their text layer. Extra to the text results: if it cannot be built, the
    job keeps its other results and the API says the PDF is missing (but a dependency that is
    down fails the completion, which is retried, rather than leave the PDF out for good)."""
    sources = [SourcePage(page.source_key, page.source_index) for page in job.pages]
    try:
        if build_pdf is None:
            data = build_searchable_pdf(store.get, sources, results)
        else:
            data = build_pdf(sources, results)
    except Exception as error:
        if is_transient(error):  # the store is down, not the PDF: the completion is retried
            raise
        log.exception("result.searchable_pdf_failed", job_id=job.id)
        return
    store.put(object_keys.result_key(job.id, "pdf"), data, object_keys.result_media_type("pdf"))
