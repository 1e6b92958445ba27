"""A document's page results read back from their objects in document order, a batch at a
time with several store calls at once: a 3,000-page book's results are never all in memory.
A page never run is listed as such, never dropped."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import NamedTuple

from ocr_worker.outputs.pages import store_calls
from uocr_core.contracts import PageResult
from uocr_core.models import Job
from uocr_core.storage import ObjectNotFound, ObjectStore

# Pages read back at once: enough to keep the store calls busy, few enough that a batch of
# results (~10 KB a page with its blocks) is a small part of the worker's memory.
READ_BATCH = 64


class PageRow(NamedTuple):
    """What reading a page back needs of its row (the pool's threads must not touch the
    session, and a render process gets no rows)."""

    page_no: int
    result_key: str | None
    status: str
    error: str | None


def page_rows(job: Job) -> list[PageRow]:
    return [PageRow(p.page_no, p.result_key, p.status, p.error) for p in job.pages]


def read_pages(store: ObjectStore, rows: list[PageRow]) -> Iterator[PageResult]:
    """Every page's result in the rows' order, ``READ_BATCH`` at a time."""
    load = functools.partial(_load, store)
    for start in range(0, len(rows), READ_BATCH):
        batch = rows[start : start + READ_BATCH]
        with store_calls(len(batch)) as pool:
            results = list(pool.map(load, batch))
        yield from results


def load_page_results(store: ObjectStore, job: Job) -> list[PageResult]:
    """Every page in document order, all at once (a short document, or a test)."""
    return list(read_pages(store, page_rows(job)))


def _load(store: ObjectStore, page: PageRow) -> PageResult:
    try:
        if page.result_key is None:
            raise ObjectNotFound(page.page_no)
        return PageResult.model_validate_json(store.get(page.result_key))
    except ObjectNotFound:
        if page.status == "failed":
            return PageResult(
                page=page.page_no, status="failed", error=page.error or "not processed"
            )
        return PageResult(page=page.page_no, status="canceled")
