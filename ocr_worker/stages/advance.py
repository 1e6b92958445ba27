"""Advancing a document past a settled group: the next group queued, or the job found ready to
settle. Row locks make it idempotent: a redelivered group, or two groups of one document
settled at once by two workers, queue the next group once and finish the job once."""

from __future__ import annotations

from ocr_worker.stages import rows
from ocr_worker.stages.parts import StageParts
from ocr_worker.stages.settle import COMPLETE, Ending, finish_canceled
from uocr_core import job_lifecycle
from uocr_core.db import transaction
from uocr_core.dispatch import queue_group
from uocr_core.models import Job


def advance_job(job_id: str, group_index: int, parts: StageParts) -> Ending | None:
    """Queue the next group if it is not queued yet (groups in order), or finish the job
    once every group is settled (in order, or in parallel), or once a cancel was asked and
    no group runs any more. What is left to settle, or ``None``."""
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status in job_lifecycle.TERMINAL:
            return None
        following = rows.lock_group(session, job_id, group_index + 1)
        groups = rows.groups_by_status(session, job_id)
        if groups.keys() <= job_lifecycle.GROUP_FINISHED:
            # Every page is settled: the job ends with its outcome, even if a cancel came
            # in while its last group ran (there was nothing left to stop).
            return COMPLETE
        if job.cancel_requested:
            # A group still running elsewhere (groups in parallel) finishes the job when
            # it is recorded, so no page it writes lands after the job's end.
            if groups.get("running"):
                return None
            delivery_id = finish_canceled(
                session,
                job,
                store=parts.store,
                settings=parts.settings,
                render_pool=parts.render_pool,
            )
            return Ending(complete=False, delivery_id=delivery_id)
        if following is not None and following.enqueued_at is None:
            queue_group(parts.dispatcher, following, priority=job.priority)
    return None
