"""Claiming a page group: under the job's and the group's row locks, with a lease of its own.

A claim either returns the group's pages to run (``ClaimedGroup``) or says why there is nothing
to run here (a string the task logs and returns). A group that kept failing is given up: its
pages fail with the reason and the rest of the document goes on. The queries are this stage's
own: the next stages take the claim, not the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

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
    settings = parts.settings.worker
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        group = _locked_group(session, job_id, group_index)
        if group is None or job is None:
            return "missing"
        refused = _refusal(job, group, parts.model_version, settings.max_group_attempts)
        if refused == "gave_up":
            _give_up(session, group)  # its pages counted by advancing, as a recorded group's
        elif refused == "other_version":
            # A message on the wrong queue (a worker started with other queues by hand):
            # sent back to the job's own version rather than run on this one.
            queue_group(parts.dispatcher, group, priority=job.priority)
        if refused is not None:
            return refused
        claimed = _claim(session, job, group, parts.worker_id, settings.lease_seconds)
        job_lifecycle.start(job)
        return claimed


def _locked_group(session: Session, job_id: str, group_index: int) -> PageGroup | None:
    """Callers lock the job row first: one lock order everywhere, so groups of one document
    claimed, recorded and advanced at once by several workers never deadlock."""
    return session.scalar(
        select(PageGroup)
        .where(PageGroup.job_id == job_id, PageGroup.group_index == group_index)
        .with_for_update()
    )


def _refusal(job: Job, group: PageGroup, model_version: str, max_attempts: int) -> str | None:
    """Why this worker does not run the group now, or ``None``: it claims it."""
    if job.status in job_lifecycle.TERMINAL:
        return "finished"  # a late redelivery: the job ended meanwhile
    if job.cancel_requested:
        return "canceled"
    if group.status in job_lifecycle.GROUP_FINISHED:
        return "done"
    if (job.model_version or DEFAULT_MODEL_VERSION) != model_version:
        return "other_version"
    expires = group.lease_expires_at
    if group.status == "running" and expires is not None and expires > utcnow():
        return "leased"
    if group.attempts >= max_attempts:
        return "gave_up"
    return None


def _claim(
    session: Session, job: Job, group: PageGroup, worker_id: str, lease_seconds: float
) -> ClaimedGroup:
    """The group running under a new lease, its output pages not done yet marked running (an
    attempt each), and what the decode needs of the group: its pages, its boundary (context)
    pages, and the job's facts."""
    now, token = utcnow(), new_lease_token(worker_id)
    group.status = "running"
    group.attempts += 1
    group.lease_owner = token
    group.lease_expires_at = now + timedelta(seconds=lease_seconds)
    group.started_at = group.started_at or now
    pages = _pages(session, group, first=group.first_position)
    context_end = group.first_position + group.overlap
    running = [p for p in pages if p.position >= context_end and p.status != "succeeded"]
    for page in running:
        page.status, page.started_at = "running", now
        page.attempts += 1
    return ClaimedGroup(
        group_id=group.id,
        group_index=group.group_index,
        context=[_ref(p) for p in pages if p.position < context_end],
        pages=[_ref(p) for p in running],
        is_last=group.last_position == job.page_count - 1,
        lease_token=token,
        interactive=job.priority == "interactive",
    )


def _give_up(session: Session, group: PageGroup) -> None:
    """A poison group: its pages fail with the reason, the rest of the document goes on."""
    reason = f"gave up after {group.attempts} attempts (the page group kept failing)"
    for page in _pages(session, group, first=group.first_position + group.overlap):
        if page.status != "succeeded":
            page.status, page.error, page.finished_at = "failed", reason, utcnow()
            page.needs_review = True  # a failed page is worth a look: the review list
    group.status, group.finished_at, group.lease_owner = "failed", utcnow(), None
    log.error("page_group.gave_up", job_id=group.job_id, page_group=group.group_index)


def _pages(session: Session, group: PageGroup, *, first: int) -> list[Page]:
    """The group's pages from position ``first`` (its first, or its first output page)."""
    return list(
        session.scalars(
            select(Page)
            .where(Page.job_id == group.job_id, Page.position.between(first, group.last_position))
            .order_by(Page.position)
        )
    )


def _ref(page: Page) -> PageRef:
    return PageRef(page.position, page.page_no, page.source_key, page.source_index)
