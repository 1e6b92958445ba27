"""Advancing a document past a settled group: its counters recounted from the page rows, then
the next group queued, or the job found ready to settle. Row locks make it idempotent: a
redelivered group, or two groups of one document settled at once by two workers, queue the
next group once and finish the job once."""

from __future__ import annotations

from enum import Enum

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ocr_worker.stages.parts import StageParts
from uocr_core import job_lifecycle
from uocr_core.db import transaction
from uocr_core.dispatch import queue_group
from uocr_core.models import Job, Page, PageGroup


class Ending(Enum):
    """What advancing leaves to settle: every group is settled (the document is complete), or
    a cancel was asked and no group runs any more."""

    COMPLETE = "complete"
    CANCELED = "canceled"


def advance_job(job_id: str, group_index: int, parts: StageParts) -> Ending | None:
    """Queue the next group if it is not queued yet (groups in order), or say the job is to
    be finished: once every group is settled (in order, or in parallel), or once a cancel was
    asked and no group runs any more. What is left to settle, or ``None``."""
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        if job is None or job.status in job_lifecycle.TERMINAL:
            return None
        following = _locked_group(session, job_id, group_index + 1)
        groups = _groups_by_status(session, job_id)
        _recount(session, job)
        if groups.keys() <= job_lifecycle.GROUP_FINISHED:
            # Every page is settled: the job ends with its outcome, even if a cancel came
            # in while its last group ran (there was nothing left to stop).
            return Ending.COMPLETE
        if job.cancel_requested:
            # A group still running elsewhere (groups in parallel) advances the job when
            # it is recorded, so no page it writes lands after the job's end.
            return None if groups.get("running") else Ending.CANCELED
        if following is not None and following.enqueued_at is None:
            queue_group(parts.dispatcher, following, priority=job.priority)
    return None


def _locked_group(session: Session, job_id: str, group_index: int) -> PageGroup | None:
    return session.scalar(
        select(PageGroup)
        .where(PageGroup.job_id == job_id, PageGroup.group_index == group_index)
        .with_for_update()
    )


def _groups_by_status(session: Session, job_id: str) -> dict[str, int]:
    """How many of the job's groups are in each status (only the statuses some group is in)."""
    rows = session.execute(
        select(PageGroup.status, func.count())
        .where(PageGroup.job_id == job_id)
        .group_by(PageGroup.status)
    )
    return {status: count for status, count in rows.all()}


def _recount(session: Session, job: Job) -> None:
    """Counters derived from the page rows, so a redone group never counts a page twice; under
    the job's lock, so they include every group committed before it. Counted by the database
    in one aggregate: a 3,000-page book is recounted at each of its 375 groups, and fetching
    its rows each time made a document's bookkeeping grow with the square of its length."""
    settled = Page.status.in_((job_lifecycle.SUCCEEDED, job_lifecycle.FAILED))
    failed = Page.status == job_lifecycle.FAILED
    # job_lifecycle.is_flagged, in SQL: read, with at least one warning.
    flagged = (Page.status == job_lifecycle.SUCCEEDED) & (func.json_array_length(Page.warnings) > 0)
    done, failed_count, flagged_count = session.execute(
        select(
            func.count().filter(settled), func.count().filter(failed), func.count().filter(flagged)
        ).where(Page.job_id == job.id)
    ).one()
    job.pages_done, job.pages_failed, job.pages_flagged = done, failed_count, flagged_count
