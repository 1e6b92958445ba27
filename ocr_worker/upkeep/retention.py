"""Deleting what retention no longer keeps: a finished job's document and results, and its
page and group rows, after ``result_retention_days``. The job's record stays and says when, so
a late client gets 410 with the reason instead of a puzzling 404. A job its client deleted is
not retention's: DELETE removed its objects, and the orphan sweep (``orphans.py``) takes what a
worker wrote after."""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import object_keys
from uocr_core.db import transaction, utcnow
from uocr_core.job_lifecycle import TERMINAL
from uocr_core.models import Job, Page, PageGroup
from uocr_core.search import index as search_index
from uocr_core.storage import ObjectStore

log = structlog.get_logger(__name__)


def purge_expired_results(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    *,
    retention_days: float,
    now: datetime | None = None,
    batch: int = 100,
) -> list[str]:
    """Delete the objects of every expired job, ``batch`` jobs to a transaction; returns their
    ids. Objects go first, then the mark: a run cut short leaves jobs the next run finishes."""
    if retention_days <= 0:
        return []  # kept for ever
    cutoff = (now or utcnow()) - timedelta(days=retention_days)
    purged: list[str] = []
    while True:
        done = _purge_batch(sessions, store, cutoff, batch)
        purged += done
        if len(done) < batch:
            return purged


def _purge_batch(
    sessions: sessionmaker[Session], store: ObjectStore, cutoff: datetime, batch: int
) -> list[str]:
    with transaction(sessions) as session:
        expired = session.scalars(
            select(Job)
            .where(
                Job.status.in_(TERMINAL),
                Job.finished_at < cutoff,
                Job.results_deleted_at.is_(None),
                Job.deleted_at.is_(None),  # DELETE removed them; late leftovers are orphans
            )
            .order_by(Job.finished_at)
            .limit(batch)
            .with_for_update(skip_locked=True)
        ).all()
        for job in expired:
            store.delete(store.keys_under(object_keys.job_prefix(job.id)))
            job.results_deleted_at = utcnow()
            log.info("job.results_deleted", job_id=job.id, finished_at=str(job.finished_at))
        ids = [job.id for job in expired]
        # The per-page detail goes with the results: the job's row keeps its counters, and the
        # page and group rows (most of the database: a row a page) do not pile up for ever.
        session.execute(delete(Page).where(Page.job_id.in_(ids)))
        search_index.forget_jobs(session, ids)
        session.execute(delete(PageGroup).where(PageGroup.job_id.in_(ids)))
        return ids
