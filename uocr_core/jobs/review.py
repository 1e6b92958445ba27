"""The pages worth a human look: a tenant's review list, oldest first, and marking a page
reviewed (audited).

A page goes on the list when it is recorded (the worker's record stage sets ``needs_review``:
failed, read with a warning, or with less confidence than the deployment accepts) and leaves
it once someone marks it reviewed. The list reads the partial index ``ix_pages_to_review``,
which holds only the pages still to review (a few in a hundred), not the whole table; it is
shared by the tenants, so a tenant's list reads past other tenants' waiting pages (an index
led by the tenant would need the tenant on each page row: docs/scaling.md). Keyset pagination,
as the job list (``listing``): the cursor names the last page shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from uocr_core import audit
from uocr_core.db import utcnow
from uocr_core.errors import InvalidRequest, NotFound
from uocr_core.jobs.listing import decode_cursor, encode_cursor
from uocr_core.models import Job, Page


@dataclass(frozen=True)
class ReviewItem:
    page: Page
    job: Job


@dataclass(frozen=True)
class ReviewPage:
    items: list[ReviewItem]
    next_cursor: str | None  # None on the last page


def pages_to_review(
    session: Session,
    *,
    tenant_id: str,
    batch_id: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> ReviewPage:
    """The tenant's pages still to review, oldest first (a batch's only, if named)."""
    query = (
        select(Page, Job)
        .join(Job, Job.id == Page.job_id)
        .where(
            Page.needs_review,
            Page.reviewed_at.is_(None),
            Page.finished_at.is_not(None),
            Job.tenant_id == tenant_id,
            Job.deleted_at.is_(None),
            Job.results_deleted_at.is_(None),  # past retention: nothing left to look at
        )
    )
    if batch_id is not None:
        query = query.where(Job.batch_id == batch_id)
    if cursor is not None:
        finished_at, page_id = decode_cursor(cursor)
        if not (page_id.isascii() and page_id.isdecimal()):
            raise InvalidRequest("cursor is not one this API gave out; start without it")
        after = int(page_id)
        query = query.where(
            or_(
                Page.finished_at > finished_at,
                and_(Page.finished_at == finished_at, Page.id > after),
            )
        )
    rows = session.execute(query.order_by(Page.finished_at, Page.id).limit(limit + 1)).all()
    items = [ReviewItem(page, job) for page, job in rows[:limit]]
    last = items[-1].page if len(rows) > limit else None
    if last is None or last.finished_at is None:  # listed pages are finished: always set
        return ReviewPage(items, None)
    return ReviewPage(items, encode_cursor(last.finished_at, str(last.id)))


def mark_reviewed(
    session: Session, *, tenant_id: str, job_id: str, page_no: int, actor: audit.Actor
) -> Page:
    """The page marked reviewed by ``actor`` (again: it keeps the first mark); audited."""
    page = session.scalar(
        select(Page)
        .join(Job, Job.id == Page.job_id)
        .where(
            Page.job_id == job_id,
            Page.page_no == page_no,
            Job.tenant_id == tenant_id,
            Job.deleted_at.is_(None),
        )
        .with_for_update()  # two marks at once: the second sees the first and keeps it
    )
    if page is None:
        raise NotFound(f"job {job_id} has no page {page_no}")
    if page.reviewed_at is None:
        page.reviewed_at, page.reviewed_by = utcnow(), actor.name
        audit.record(session, actor, audit.Action.PAGE_REVIEWED, target=f"{job_id}/{page_no}")
    return page
