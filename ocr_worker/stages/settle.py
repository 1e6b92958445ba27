"""Settling what a group changed where clients look: the job's progress written; and once the
document is complete or canceled, its result assembled, the job finished, its webhook queued
and the engine told to forget it."""

from __future__ import annotations

import functools

import structlog

from ocr_worker.imaging import ProcessRasterizer
from ocr_worker.outputs import document, progress
from ocr_worker.outputs.searchable_pdf import write_in_render_process
from ocr_worker.stages.advance import Ending
from ocr_worker.stages.parts import StageParts
from uocr_core import job_lifecycle, object_keys
from uocr_core.db import transaction
from uocr_core.models import Job
from uocr_core.webhooks.events import record_job_finished

log = structlog.get_logger(__name__)


def settle_job(job_id: str, ending: Ending | None, parts: StageParts) -> None:
    """The progress written under the job's lock (writes of groups settled at once land in
    order); the job finished too when advancing left an ``ending``. Two workers settling a
    document's last groups at once may both assemble it: the objects are at fixed keys and
    identical, and only one of them finishes the job."""
    if ending is not None:
        _assemble(job_id, ending, parts)
    delivery_id = None
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status in job_lifecycle.TERMINAL:
            return  # finished meanwhile (by the other worker), or by a redelivered group
        if ending is not None:
            # A cancel that came in while a complete document was assembled is too late:
            # nothing is left to stop, and the job ends with its whole result.
            job_lifecycle.settle(job, canceled=ending is Ending.CANCELED)
            log.info("job.finished", job_id=job_id, status=job.status, failed=job.pages_failed)
        if job.deleted_at is not None:
            # Deleted while it ran: whatever this document's workers wrote goes too (a worker
            # that dies first leaves its objects to the orphan sweep). No webhook.
            parts.store.delete(parts.store.keys_under(object_keys.job_prefix(job_id)))
        else:
            progress.write_progress(parts.store, session, job)
            if ending is not None:
                delivery_id = record_job_finished(session, job, settings=parts.settings)
    if delivery_id:
        parts.dispatcher.enqueue_webhook(delivery_id=delivery_id)
    if ending is not None:
        parts.engine.end_document(job_id)


def _assemble(job_id: str, ending: Ending, parts: StageParts) -> None:
    """The result files, written before the job is marked finished (so a finished job has
    them) and without holding the job's row: a searchable PDF of 300 scans takes seconds, and
    a cancel or a poll's writer would wait for it. Every group is settled and none runs, so no
    page changes any more."""
    with parts.sessions() as session:
        job = session.get(Job, job_id)
        if job is None or job.deleted_at is not None or job.status in job_lifecycle.TERMINAL:
            return
        document.write_document(
            parts.store,
            job,
            status=job_lifecycle.settled_status(job, canceled=ending is Ending.CANCELED),
            write_pdf=pdf_writer(parts.render_pool),
        )


def pdf_writer(render_pool: ProcessRasterizer | None) -> document.PdfWriter | None:
    """The searchable PDF built in a render process when there are some (PyMuPDF holds the
    GIL for the whole build), else here."""
    if render_pool is None:
        return None
    return functools.partial(render_pool.call, write_in_render_process)
