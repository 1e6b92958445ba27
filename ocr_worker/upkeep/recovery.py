"""Taking over page groups whose worker died: their lease expired without being renewed.

Work that never started (a lost message, a worker that died before claiming) is the
reconciler's (``reconciler.py``); both run on the same beat tick."""

from __future__ import annotations

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.stages.lease import cancel_group, return_to_pending
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher, queue_group
from uocr_core.job_lifecycle import TERMINAL
from uocr_core.models import Job, PageGroup

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
            return_to_pending(session, group)
            if job.status in TERMINAL:  # it ended meanwhile: nothing will run the group again
                cancel_group(session, group)
                continue
            queue_group(dispatcher, group, priority=job.priority)
            recovered.append(f"{group.job_id}:{group.group_index}")
            log.warning("page_group.recovered", job_id=group.job_id, page_group=group.group_index)
    return recovered
