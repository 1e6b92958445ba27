"""Deleting objects no job owns: what a refused submit or a failed cleanup left in the bucket.

Retention only sees objects through their job's row, so an object without one would stay for
ever. ``jobs/<id>/...`` whose job row does not exist is swept once older than
``orphan_grace_hours`` (the grace covers a submit that has stored its document and not yet
committed its row). ``inbox/<tenant>/...`` is the tenants' staging area for JSON submits (which
copy the document into the job): a backlog may wait there for days, so it is swept only when an
operator sets ``inbox_retention_hours``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.core.db import utcnow
from ocr_api.core.models import Job
from ocr_api.core.storage import ObjectStore

log = structlog.get_logger(__name__)

_JOBS, _INBOX = "jobs/", "inbox/"


def sweep_orphan_objects(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    *,
    grace_hours: float,
    inbox_retention_hours: float | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Delete orphaned objects older than the grace; returns their keys."""
    now = now or utcnow()
    cutoff = now - timedelta(hours=grace_hours)
    by_job: dict[str, list[str]] = defaultdict(list)
    for obj in store.objects_under(_JOBS):
        if obj.modified < cutoff:
            by_job[obj.key[len(_JOBS) :].split("/", 1)[0]].append(obj.key)
    known = _existing_job_ids(sessions, list(by_job))
    orphaned = [key for job_id, keys in by_job.items() if job_id not in known for key in keys]
    if inbox_retention_hours is not None:
        inbox_cutoff = now - timedelta(hours=inbox_retention_hours)
        orphaned += [o.key for o in store.objects_under(_INBOX) if o.modified < inbox_cutoff]
    if orphaned:
        store.delete(orphaned)
        log.info("objects.orphans_deleted", count=len(orphaned))
    return orphaned


def _existing_job_ids(sessions: sessionmaker[Session], job_ids: list[str]) -> set[str]:
    found: set[str] = set()
    with sessions() as session:
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            found.update(session.scalars(select(Job.id).where(Job.id.in_(chunk))))
    return found
