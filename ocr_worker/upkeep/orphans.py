"""Deleting objects no job owns: what a refused submit or a failed cleanup left in the bucket.

Retention only sees objects through their job's row, so an object without one would stay for
ever. ``jobs/<id>/...`` whose job row does not exist is swept once older than
``orphan_grace_hours`` (the grace covers a submit that has stored its document and not yet
committed its row). A deleted job (its row is a tombstone) owns nothing: whatever a worker
still running wrote after the DELETE is swept at once. ``inbox/<tenant>/...`` is the tenants'
staging area for JSON submits (which copy the document into the job): a backlog may wait there
for days, so it is swept only when an operator sets ``inbox_retention_hours``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core.db import utcnow
from uocr_core.models import Job
from uocr_core.storage import ObjectStore, StoredObject

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
    """Delete orphaned objects older than the grace (a deleted job's at once); returns their
    keys."""
    now = now or utcnow()
    cutoff = now - timedelta(hours=grace_hours)
    by_job: dict[str, list[StoredObject]] = defaultdict(list)
    for obj in store.objects_under(_JOBS):
        by_job[obj.key[len(_JOBS) :].split("/", 1)[0]].append(obj)
    deleted = _deleted_by_job(sessions, list(by_job))
    orphaned = [
        obj.key
        for job_id, objects in by_job.items()
        for obj in objects
        if deleted.get(job_id) or (job_id not in deleted and obj.modified < cutoff)
    ]
    if inbox_retention_hours is not None:
        inbox_cutoff = now - timedelta(hours=inbox_retention_hours)
        orphaned += [o.key for o in store.objects_under(_INBOX) if o.modified < inbox_cutoff]
    if orphaned:
        store.delete(orphaned)
        log.info("objects.orphans_deleted", count=len(orphaned))
    return orphaned


def _deleted_by_job(sessions: sessionmaker[Session], job_ids: list[str]) -> dict[str, bool]:
    """Whether each job that has a row is deleted; a job without one is absent."""
    found: dict[str, bool] = {}
    with sessions() as session:
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            rows = session.execute(select(Job.id, Job.deleted_at).where(Job.id.in_(chunk)))
            found.update((job_id, deleted_at is not None) for job_id, deleted_at in rows)
    return found
