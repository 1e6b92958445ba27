"""Taking over page groups whose worker died: their lease expired without being renewed."""

from __future__ import annotations

from datetime import timedelta

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.core.db import transaction, utcnow
from ocr_api.core.dispatch import Dispatcher, queue_group
from ocr_api.core.models import Job, Page, PageGroup

log = structlog.get_logger(__name__)


def recover_stale_groups(sessions: sessionmaker[Session], dispatcher: Dispatcher) -> list[str]:
    """Re-queue every running group with an expired lease; returns '<job>:<group>' for each."""
    recovered = []
    with transaction(sessions) as session:
        stale = session.scalars(
            select(PageGroup)
            .where(PageGroup.status == "running", PageGroup.lease_expires_at < utcnow())
            .with_for_update(skip_locked=True)
        ).all()
        for group in stale:
            job = session.get(Job, group.job_id)
            assert job is not None
            _reset_pages(session, group)
            group.status, group.lease_owner, group.lease_expires_at = "pending", None, None
            queue_group(dispatcher, group, priority=job.priority)
            recovered.append(f"{group.job_id}:{group.group_index}")
            log.warning("page_group.recovered", job_id=group.job_id, page_group=group.group_index)
    return recovered


def resume_stalled_jobs(
    sessions: sessionmaker[Session], dispatcher: Dispatcher, *, quiet_seconds: int
) -> list[str]:
    """Running jobs with nothing running or queued (a worker died between finishing a group and
    queuing the next): re-send their last settled group, whose task then only advances the job.
    Advancing is idempotent, so a re-send that races a healthy worker does no harm."""
    resumed = []
    cutoff = utcnow() - timedelta(seconds=quiet_seconds)
    with transaction(sessions) as session:
        for job in session.scalars(select(Job).where(Job.status == "running")):
            groups = job.groups
            active = [
                g
                for g in groups
                if g.status == "running" or (g.status == "pending" and g.enqueued_at is not None)
            ]
            settled = [g for g in groups if g.status in ("done", "failed")]
            if active or not settled or (settled[-1].finished_at or cutoff) > cutoff:
                continue
            last = settled[-1]
            dispatcher.enqueue_group(
                job_id=job.id,
                group_index=last.group_index,
                priority=job.priority,
                group_pages=last.num_pages,
            )
            resumed.append(f"{job.id}:{last.group_index}")
            log.warning("job.resumed", job_id=job.id, page_group=last.group_index)
    return resumed


def _reset_pages(session: Session, group: PageGroup) -> None:
    pages = session.scalars(
        select(Page).where(
            Page.job_id == group.job_id,
            Page.position.between(group.first_position, group.last_position),
            Page.status == "running",
        )
    )
    for page in pages:
        page.status = "pending"
