"""The progress object clients poll: the job's counters and each page's status."""

from __future__ import annotations

import json

from uocr_core import object_keys
from uocr_core.job_lifecycle import GROUP_FINISHED
from uocr_core.models import Job
from uocr_core.storage import ObjectStore


def write_progress(store: ObjectStore, job: Job) -> None:
    progress = {
        "job_id": job.id,
        "status": job.status,
        "pages_total": job.page_count,
        "pages_done": job.pages_done,
        "pages_failed": job.pages_failed,
        "pages_flagged": job.pages_flagged,
        "groups_total": len(job.groups),
        "groups_done": sum(g.status in GROUP_FINISHED for g in job.groups),
        "pages": [{"page": p.page_no, "status": p.status} for p in job.pages],
    }
    store.put(object_keys.progress_key(job.id), json.dumps(progress).encode(), "application/json")
