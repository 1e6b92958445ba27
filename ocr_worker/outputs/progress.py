"""The progress object clients poll: the job's counters and each page's status."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from uocr_core import object_keys
from uocr_core.jobs.page_listing import group_counts
from uocr_core.models import Job, Page
from uocr_core.storage import ObjectStore


def write_progress(store: ObjectStore, session: Session, job: Job) -> None:
    """Written as each group settles. Read as columns and counted by the database, not as the
    job's page and group objects: a 3,000-page book writes it 375 times, and loading every
    page row as an object each time cost it ~50 ms a group."""
    groups_total, groups_done = group_counts(session, job.id)
    pages = session.execute(
        select(Page.page_no, Page.status).where(Page.job_id == job.id).order_by(Page.position)
    ).all()
    progress = {
        "job_id": job.id,
        "status": job.status,
        "pages_total": job.page_count,
        "pages_done": job.pages_done,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "groups_total": groups_total,
        "groups_done": groups_done,
        "pages": [{"page": page_no, "status": status} for page_no, status in pages],
    }
    store.put(object_keys.progress_key(job.id), json.dumps(progress).encode(), "application/json")
