"""Claiming a page group: under the job's and the group's row locks, with a lease of its own.

A claim either returns the group's pages to run (``ClaimedGroup``) or says why there is nothing
to run here (a string the task logs and returns). A group that kept failing is given up: its
pages fail with the reason and the rest of the document goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import structlog
from sqlalchemy.orm import Session

from ocr_worker.stages import rows
from ocr_worker.stages.lease import new_lease_token
from ocr_worker.stages.parts import StageParts
from uocr_core import job_lifecycle
from uocr_core.contracts import DEFAULT_MODEL_VERSION
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import queue_group
from uocr_core.models import Job, Page, PageGroup

log = structlog.get_logger(__name__)

# Claims refused because the group is settled or the job stops: the document may still move on.
SETTLED = frozenset({"done", "gave_up", "canceled"})


@dataclass(frozen=True)
class PageRef:
    position: int
    page_no: int
    source_key: str
    source_index: int


@dataclass(frozen=True)
class ClaimedGroup:
    group_id: int
    group_index: int
    context: list[PageRef]
    pages: list[PageRef]  # output pages not yet done
    is_last: bool
    lease_token: str  # this claim's, fencing its renewals and its record
    interactive: bool = False  # the job's priority: the engine takes it ahead of the backlog


def claim_group(job_id: str, group_index: int, parts: StageParts) -> ClaimedGroup | str:
    """The group claimed for this worker (its ``worker_id``, serving its ``model_version``),
    or why there is nothing to run here: "missing", "finished", "canceled", "done",
    "other_version", "leased" or "gave_up"."""
    settings, model_version = parts.settings.worker, parts.model_version
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        group = rows.lock_group(session, job_id, group_index)
        if group is None or job is None:
            return "missing"
        if job.status in job_lifecycle.TERMINAL:
            return "finished"  # a late redelivery: the job ended meanwhile
        if job.cancel_requested:
            return "canceled"
        if group.status in job_lifecycle.GROUP_FINISHED:
            return "done"
        if (job.model_version or DEFAULT_MODEL_VERSION) != model_version:
            # A message on the wrong queue (a worker started with other queues by hand):
            # sent back to the job's own version rather than run on this one.
            queue_group(parts.dispatcher, group, priority=job.priority)
            return "other_version"
        now = utcnow()
        if group.status == "running" and group.lease_expires_at and group.lease_expires_at > now:
            return "leased"
        if group.attempts >= settings.max_group_attempts:
            give_up(session, job, group)
            return "gave_up"
        job_lifecycle.start(job)
        group.status = "running"
        group.attempts += 1
        group.lease_owner = new_lease_token(parts.worker_id)
        group.lease_expires_at = now + timedelta(seconds=settings.lease_seconds)
        group.started_at = group.started_at or now
        return _claimed(
            session,
            group,
            is_last=group.last_position == job.page_count - 1,
            interactive=job.priority == "interactive",
        )


def _claimed(
    session: Session, group: PageGroup, *, is_last: bool, interactive: bool
) -> ClaimedGroup:
    """The group's output pages not done yet marked running (an attempt each), and what the
    decode needs of the group: its pages, its boundary (context) pages, and the job's facts."""
    pages = rows.pages_between(session, group.job_id, group.first_position, group.last_position)
    context_end = group.first_position + group.overlap
    running = [p for p in pages if p.position >= context_end and p.status != "succeeded"]
    for page in running:
        page.status, page.started_at = "running", utcnow()
        page.attempts += 1
    return ClaimedGroup(
        group_id=group.id,
        group_index=group.group_index,
        context=[_ref(p) for p in pages if p.position < context_end],
        pages=[_ref(p) for p in running],
        is_last=is_last,
        lease_token=group.lease_owner or "",
        interactive=interactive,
    )


def give_up(session: Session, job: Job, group: PageGroup) -> None:
    """A poison group: its pages fail with the reason, the rest of the document goes on."""
    reason = f"gave up after {group.attempts} attempts (the page group kept failing)"
    for page in rows.group_pages(session, group):
        if page.status != "succeeded":
            page.status, page.error, page.finished_at = "failed", reason, utcnow()
    group.status, group.finished_at, group.lease_owner = "failed", utcnow(), None
    rows.recount(session, job)
    log.error("page_group.gave_up", job_id=job.id, page_group=group.group_index)


def _ref(page: Page) -> PageRef:
    return PageRef(page.position, page.page_no, page.source_key, page.source_index)
