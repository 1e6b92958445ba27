"""Settling a job whose groups are all settled, or that was stopped between groups: its
document assembled, the job finished, its webhook queued and the engine told to forget it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import structlog
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.imaging import ProcessRasterizer
from ocr_worker.outputs import assembly
from ocr_worker.outputs.searchable_pdf import build_in_render_process
from ocr_worker.stages.parts import StageParts
from uocr_core import job_lifecycle, object_keys
from uocr_core.db import transaction
from uocr_core.models import Job
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore
from uocr_core.webhooks.events import record_job_finished

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Ending:
    """What advancing left to settle: a document to complete (every group is settled), or a
    job already finished as canceled under its lock, whose webhook waits for that commit."""

    complete: bool
    delivery_id: str | None = None


COMPLETE = Ending(complete=True)


def settle_job(job_id: str, ending: Ending | None, parts: StageParts) -> None:
    """Nothing when there is nothing to settle (``None``: groups remain, or the job ended)."""
    if ending is None:
        return
    finished, delivery_id = True, ending.delivery_id
    if ending.complete:
        finished, delivery_id = complete_job(
            job_id,
            sessions=parts.sessions,
            store=parts.store,
            settings=parts.settings,
            render_pool=parts.render_pool,
        )
    if delivery_id:
        parts.dispatcher.enqueue_webhook(delivery_id=delivery_id)
    if finished:
        parts.engine.end_document(job_id)


def complete_job(
    job_id: str,
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    settings: Settings,
    render_pool: ProcessRasterizer | None,
) -> tuple[bool, str | None]:
    """Every group is settled, so no page changes any more: assemble the document without
    holding the job's row (a searchable PDF of 300 scans takes seconds, and a cancel or a
    poll's writer would wait for it), then mark the job finished under the lock. Two
    workers settling a document's last groups at once may both assemble it: the objects
    are at fixed keys and identical, and only one of them finishes the job."""
    with sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        if job.deleted_at is None:
            assembly.write_document(
                store,
                job,
                status=job_lifecycle.outcome(job),
                build_pdf=pdf_builder(render_pool),
            )
    with transaction(sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status in job_lifecycle.TERMINAL:
            return False, None  # the other worker finished it
        # A cancel that came in while the document was assembled is too late: nothing is
        # left to stop, and the job ends with its whole result.
        job_lifecycle.finish(job)
        return True, _finished(session, job, store=store, settings=settings)


def finish_canceled(
    session: Session,
    job: Job,
    *,
    store: ObjectStore,
    settings: Settings,
    render_pool: ProcessRasterizer | None,
) -> str | None:
    """Stopped between groups: the partial result lists the pages never run as canceled."""
    job_lifecycle.finish_canceled(job)
    if job.deleted_at is None:
        assembly.write_document(store, job, status=job.status, build_pdf=pdf_builder(render_pool))
    return _finished(session, job, store=store, settings=settings)


def pdf_builder(render_pool: ProcessRasterizer | None) -> assembly.PdfBuilder | None:
    """The searchable PDF built in a render process when there are some (PyMuPDF holds the
    GIL for the whole build), else here."""
    if render_pool is None:
        return None
    return functools.partial(render_pool.call, build_in_render_process)


def _finished(session: Session, job: Job, *, store: ObjectStore, settings: Settings) -> str | None:
    log.info("job.finished", job_id=job.id, status=job.status, pages_failed=job.pages_failed)
    if job.deleted_at is not None:
        # Deleted while it ran: whatever this document's workers wrote since goes too (a
        # worker that dies first leaves its objects to the orphan sweep). No webhook.
        store.delete(store.keys_under(object_keys.job_prefix(job.id)))
        return None
    assembly.write_progress(store, job)
    return record_job_finished(session, job, settings=settings)
