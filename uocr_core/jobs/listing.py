"""A tenant's jobs, newest first, a page at a time.

Keyset pagination: the cursor names the last job shown, so pages stay stable while new jobs
arrive (an offset would shift under a busy tenant and repeat or skip jobs). Deleted jobs are not
listed: their tombstones answer only a direct read (410).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from uocr_core.errors import InvalidRequest
from uocr_core.models import Job


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    next_cursor: str | None  # None on the last page


def list_jobs(
    session: Session,
    *,
    tenant_id: str,
    status: str | None = None,
    batch_id: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> JobPage:
    query = select(Job).where(Job.tenant_id == tenant_id, Job.deleted_at.is_(None))
    if status is not None:
        query = query.where(Job.status == status)
    if batch_id is not None:
        query = query.where(Job.batch_id == batch_id)
    if cursor is not None:
        created_at, job_id = decode_cursor(cursor)
        query = query.where(
            or_(Job.created_at < created_at, and_(Job.created_at == created_at, Job.id < job_id))
        )
    rows = session.scalars(
        query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit + 1)
    ).all()
    jobs = list(rows[:limit])
    more = len(rows) > limit
    return JobPage(jobs, encode_cursor(jobs[-1].created_at, jobs[-1].id) if more else None)


def encode_cursor(created_at: datetime, row_id: str) -> str:
    """The cursor after a row of a newest-first listing (jobs here, batches too)."""
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{row_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created_at, job_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(created_at), job_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidRequest("cursor is not one this API gave out; start without it") from None
