"""The row queries every stage shares: a group under its lock, a group's pages, the job's
page counters and its groups by status."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from uocr_core import job_lifecycle
from uocr_core.models import Job, Page, PageGroup


def lock_group(session: Session, job_id: str, group_index: int) -> PageGroup | None:
    """Callers lock the job row first: one lock order everywhere, so groups of one document
    claimed, recorded and advanced at once by several workers never deadlock, and the page
    counts each recount writes include every group committed before it."""
    return session.scalar(
        select(PageGroup)
        .where(PageGroup.job_id == job_id, PageGroup.group_index == group_index)
        .with_for_update()
    )


def group_pages(session: Session, group: PageGroup) -> list[Page]:
    """The pages a group outputs (its context pages excluded)."""
    return pages_between(
        session, group.job_id, group.first_position + group.overlap, group.last_position
    )


def pages_between(session: Session, job_id: str, first: int, last: int) -> list[Page]:
    return list(
        session.scalars(
            select(Page)
            .where(Page.job_id == job_id, Page.position.between(first, last))
            .order_by(Page.position)
        )
    )


def recount(session: Session, job: Job) -> None:
    """Counters derived from the page rows, so a redone group never counts a page twice."""
    session.flush()
    pages = session.execute(select(Page.status, Page.warnings).where(Page.job_id == job.id)).all()
    statuses = Counter(status for status, _ in pages)
    job.pages_done = statuses["succeeded"] + statuses["failed"]
    job.pages_failed = statuses["failed"]
    job.pages_flagged = sum(job_lifecycle.is_flagged(*page) for page in pages)


def groups_by_status(session: Session, job_id: str) -> dict[str, int]:
    """How many of the job's groups are in each status (only the statuses some group is in)."""
    rows = session.execute(
        select(PageGroup.status, func.count())
        .where(PageGroup.job_id == job_id)
        .group_by(PageGroup.status)
    )
    return {status: count for status, count in rows.all()}
