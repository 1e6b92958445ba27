"""A batch as its owner follows it: documents by status, pages, pace and an estimated finish;
and its manifest, one JSON line per document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, or_, select
from sqlalchemy.orm import Session

from uocr_core import job_lifecycle, object_keys
from uocr_core.db import utcnow
from uocr_core.models import Batch, Job, Page
from uocr_core.schemas.batches import BatchPublic, DocumentCounts, PageCounts
from uocr_core.settings import Settings

PACE_WINDOW = timedelta(minutes=10)
_STATE = case(
    ((Job.admitted_at.is_(None)) & (Job.status == job_lifecycle.QUEUED), "waiting"),
    else_=Job.status,
)


def batch_public(session: Session, batch: Batch, settings: Settings) -> BatchPublic:
    counts: dict[str, int] = {}
    pages_total = pages_done = pages_failed = pages_flagged = admitted = 0
    rows = session.execute(
        select(
            _STATE,
            func.count(),
            func.coalesce(func.sum(Job.page_count), 0),
            func.coalesce(func.sum(Job.pages_done), 0),
            func.coalesce(func.sum(Job.pages_failed), 0),
            func.coalesce(func.sum(Job.pages_flagged), 0),
        )
        .where(Job.batch_id == batch.id)
        .group_by(_STATE)
    ).all()
    for state, count, total, done, failed, flagged in rows:
        counts[state] = count
        pages_total, pages_done = pages_total + total, pages_done + done
        pages_failed, pages_flagged = pages_failed + failed, pages_flagged + flagged
        admitted += 0 if state == "waiting" else count
    pace = _pages_per_minute(session, batch.id)
    base = f"{settings.public_base_url.rstrip('/')}/v1/batches/{batch.id}"
    return BatchPublic(
        id=batch.id,
        name=batch.name,
        status=batch.status,  # type: ignore[arg-type]
        priority=batch.priority,  # type: ignore[arg-type]
        documents=DocumentCounts(
            total=sum(counts.values()),
            **{
                state: counts.get(state, 0)
                for state in DocumentCounts.model_fields
                if state != "total"
            },
        ),
        pages=PageCounts(
            total=pages_total, done=pages_done, failed=pages_failed, flagged=pages_flagged
        ),
        pages_per_minute=pace,
        estimated_finish_at=_estimate(
            batch, counts, pages_total, pages_done + pages_failed, admitted, pace
        ),
        metadata=batch.batch_metadata,
        created_at=batch.created_at,
        closed_at=batch.closed_at,
        finished_at=batch.finished_at,
        status_url=base,
        jobs_url=f"{base}/jobs",
        manifest_url=f"{base}/manifest",
    )


def _pages_per_minute(session: Session, batch_id: str) -> float | None:
    """Pages of the batch finished in the last ten minutes: looked up from the batch's jobs
    that ran in that window, so the count costs the batch's pages, not every page the whole
    deployment finished meanwhile (docs/scaling.md)."""
    since = utcnow() - PACE_WINDOW
    active = select(Job.id).where(
        Job.batch_id == batch_id,
        Job.admitted_at.is_not(None),
        or_(Job.finished_at.is_(None), Job.finished_at >= since),
    )
    # finished_at through coalesce: compared bare, the planner ANDs each job's pages with the
    # deployment-wide finished_at index (43 ms a poll at 10^7 rows: docs/scaling.md).
    recent = func.coalesce(Page.finished_at, since) >= since
    done = session.scalar(
        select(func.count()).where(Page.job_id.in_(active), Page.finished_at.is_not(None), recent)
    )
    return round(done / (PACE_WINDOW.total_seconds() / 60), 2) if done else None


def _estimate(
    batch: Batch,
    counts: dict[str, int],
    pages_total: int,
    pages_settled: int,
    admitted: int,
    pace: float | None,
) -> datetime | None:
    """Pages left (the waiting documents counted at the admitted ones' average) at the pace of
    the last ten minutes; None when finished or before any page is done."""
    if batch.finished_at is not None or not pace:
        return None
    average = pages_total / admitted if admitted else 1.0
    left = pages_total - pages_settled + counts.get("waiting", 0) * average
    return utcnow() + timedelta(minutes=left / pace)


def manifest_lines(session: Session, batch_id: str) -> Iterator[str]:
    """One JSON line per document, in the order they were added."""
    jobs = session.scalars(
        select(Job).where(Job.batch_id == batch_id).order_by(Job.created_at, Job.id)
    ).yield_per(500)
    for job in jobs:
        yield json.dumps(_manifest_entry(session, job), ensure_ascii=False) + "\n"


def _manifest_entry(session: Session, job: Job) -> dict[str, Any]:
    has_result = job.status in job_lifecycle.TERMINAL and job.pages_done > 0
    failed_pages = []
    if job.pages_failed:
        failed_pages = [
            {"page": page_no, "error": error}
            for page_no, error in session.execute(
                select(Page.page_no, Page.error)
                .where(Page.job_id == job.id, Page.status == "failed")
                .order_by(Page.page_no)
            )
        ]
    return {
        "input_key": job.input_key,
        "source": job.source_name,
        "job_id": job.id,
        "status": "waiting" if job.admitted_at is None and job.status == "queued" else job.status,
        "pages_total": job.page_count,
        "pages_done": job.pages_done,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "error": job.error,
        "failed_pages": failed_pages,
        "results": {fmt: object_keys.result_key(job.id, fmt) for fmt in object_keys.RESULT_FILES}
        if has_result
        else {},
    }
