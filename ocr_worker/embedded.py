"""``uocr run``: one document on one machine, no servers.

SQLite stands in for Postgres, a folder for the bucket, and a local queue for Celery; the
submit path and the page-group pipeline are the very code the service runs.
"""

from __future__ import annotations

import shutil
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocr_worker.engines.base import OcrEngine, PageGroupInput
from ocr_worker.engines.factory import make_engine as make_ocr_engine
from ocr_worker.pipeline import PageGroupPipeline
from uocr_core import audit, model_versions, object_keys
from uocr_core.contracts import PageResult
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.migrate import upgrade
from uocr_core.models import Job
from uocr_core.settings import Settings
from uocr_core.storage import LocalObjectStore, ObjectNotFound
from uocr_core.tenants import create_key

OUTPUT_FORMATS = (
    "json",
    "markdown",
    "jsonl",
    "pdf",
    "hocr",
    "alto",
    "chunks",
)  # named as in the bucket


@dataclass
class InlineDispatcher:
    """Collects what would go to Celery; the embedded loop runs it in order."""

    groups: deque[tuple[str, int]] = field(default_factory=deque)

    def enqueue_group(
        self,
        *,
        job_id: str,
        group_index: int,
        priority: str,
        group_pages: int,
        document_pages: int = 0,
        model_version: str = "default",
    ) -> str | None:
        self.groups.append((job_id, group_index))
        return None

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None:
        return None  # embedded runs take no webhook URL


class PageProgressEngine(OcrEngine):
    """Reports each page as the engine reads it, not each group as the pipeline stores it.

    An engine that reads no context pages (the CPU engine) sees a group one page at a time:
    the same results, a report per page. One that carries state across a group's pages (the GPU
    engine) runs the group whole and reports its pages when it returns.
    """

    def __init__(self, inner: OcrEngine, on_page: Callable[[], None]) -> None:
        self.inner = inner
        self.name = inner.name
        self.uses_context_pages = inner.uses_context_pages
        self.on_page = on_page

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        if self.uses_context_pages:
            results = self.inner.run_group(group)
            for _ in results:
                self.on_page()
            return results
        results = []
        for n, page in enumerate(group.pages):
            last = group.is_last and n == len(group.pages) - 1
            one = PageGroupInput(group.job_id, group.group_index, [], [page], last)
            results += self.inner.run_group(one)
            self.on_page()
        return results

    def end_document(self, job_id: str) -> None:
        self.inner.end_document(job_id)


@dataclass
class PageCounter:
    """Pages done for the progress bar: one more as each page is read, then the stored count
    (failed renders included) once its group is recorded; never goes back."""

    total: int
    report: Callable[[int, int], None]
    done: int = 0

    def page_read(self) -> None:
        self.done = min(self.done + 1, self.total)
        self.report(self.done, self.total)

    def group_stored(self, pages_done: int) -> None:
        self.done = max(self.done, pages_done)
        self.report(self.done, self.total)


def run_document(
    path: Path,
    out_dir: Path,
    settings: Settings,
    *,
    pages: str | None = None,
    engine: OcrEngine | None = None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> Job:
    """OCR ``path`` into ``out_dir`` (result.json, result.md, pages.jsonl, result.pdf,
    result.hocr); returns the job. ``on_progress(done, total)`` is called page by page."""
    state_dir = out_dir / ".uocr"
    shutil.rmtree(state_dir, ignore_errors=True)  # a rerun starts clean
    state_dir.mkdir(parents=True)
    settings = _embedded_settings(settings, f"sqlite:///{state_dir / 'state.db'}")
    upgrade(settings.database.url)
    sessions = make_session_factory(make_engine(settings.database))
    store = LocalObjectStore(state_dir / "objects")
    dispatcher = InlineDispatcher()
    with transaction(sessions) as session:
        tenant_id = create_key(session, tenant_name="local").tenant_id
    job = submit_job(
        sessions=sessions,
        store=store,
        dispatcher=dispatcher,
        settings=settings,
        tenant_id=tenant_id,
        files=[UploadedFile(path.name, path.read_bytes())],
        options=JobOptions(pages=pages),
        actor=audit.OPERATOR,  # the operator at this machine's terminal
    ).job
    counter = PageCounter(job.page_count, on_progress)
    version_settings = model_versions.settings_for(settings, job.model_version)
    pipeline = PageGroupPipeline(
        sessions=sessions,
        store=store,
        engine=PageProgressEngine(engine or make_ocr_engine(version_settings), counter.page_read),
        dispatcher=dispatcher,
        settings=version_settings,
        worker_id="embedded",
        model_version=job.model_version,
    )
    on_progress(0, job.page_count)
    while dispatcher.groups:
        pipeline.run(*dispatcher.groups.popleft())
        with sessions() as session:
            job = session.get(Job, job.id) or job
        counter.group_stored(job.pages_done)
    _write_results(store, job.id, out_dir)
    return job


def _embedded_settings(settings: Settings, database_url: str) -> Settings:
    return settings.model_copy(
        update={
            "database": settings.database.model_copy(update={"url": database_url}),
            "queue_max_size": 1_000_000,
            # One document, no lease to keep alive: render in this process, from its store.
            "worker": settings.worker.model_copy(update={"render_processes": 0}),
        }
    )


def _write_results(store: LocalObjectStore, job_id: str, out_dir: Path) -> None:
    for fmt in OUTPUT_FORMATS:
        name = object_keys.result_file_name(fmt)
        try:
            (out_dir / name).write_bytes(store.get(object_keys.result_key(job_id, fmt)))
        except ObjectNotFound:  # only the searchable PDF may be missing (logged when built)
            (out_dir / name).unlink(missing_ok=True)
