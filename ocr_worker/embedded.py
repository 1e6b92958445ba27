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

from ocr_api.core import object_keys
from ocr_api.core.db import make_engine, make_session_factory, transaction
from ocr_api.core.migrate import upgrade
from ocr_api.core.models import Job
from ocr_api.core.settings import Settings
from ocr_api.core.storage import LocalObjectStore, ObjectNotFound
from ocr_api.core.tenants import create_key
from ocr_api.jobs.service import JobOptions, UploadedFile, submit_job
from ocr_worker.engines.base import OcrEngine
from ocr_worker.engines.factory import make_engine as make_ocr_engine
from ocr_worker.pipeline import PageGroupPipeline

OUTPUT_FORMATS = ("json", "markdown", "jsonl", "pdf", "hocr")  # named as in the bucket


@dataclass
class InlineDispatcher:
    """Collects what would go to Celery; the embedded loop runs it in order."""

    groups: deque[tuple[str, int]] = field(default_factory=deque)

    def enqueue_group(
        self, *, job_id: str, group_index: int, priority: str, group_pages: int
    ) -> str | None:
        self.groups.append((job_id, group_index))
        return None

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None:
        return None  # embedded runs take no webhook URL


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
    result.hocr); returns the job."""
    state_dir = out_dir / ".uocr"
    shutil.rmtree(state_dir, ignore_errors=True)  # a rerun starts clean
    state_dir.mkdir(parents=True)
    db_url = f"sqlite:///{state_dir / 'state.db'}"
    upgrade(db_url)
    settings = settings.model_copy(
        update={
            "database": settings.database.model_copy(update={"url": db_url}),
            "queue_max_size": 1_000_000,
            # One document, no lease to keep alive: render in this process, from its store.
            "worker": settings.worker.model_copy(update={"render_processes": 0}),
        }
    )
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
    ).job
    pipeline = PageGroupPipeline(
        sessions=sessions,
        store=store,
        engine=engine or make_ocr_engine(settings),
        dispatcher=dispatcher,
        settings=settings,
        worker_id="embedded",
    )
    on_progress(0, job.page_count)
    while dispatcher.groups:
        pipeline.run(*dispatcher.groups.popleft())
        with sessions() as session:
            job = session.get(Job, job.id) or job
        on_progress(job.pages_done, job.page_count)
    for fmt in OUTPUT_FORMATS:
        name = object_keys.result_file_name(fmt)
        try:
            (out_dir / name).write_bytes(store.get(object_keys.result_key(job.id, fmt)))
        except ObjectNotFound:  # only the searchable PDF may be missing (logged when built)
            (out_dir / name).unlink(missing_ok=True)
    return job
