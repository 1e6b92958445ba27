"""Content dedup: a document the tenant had read before (the same bytes, the same page range,
the same engine) takes that job's finished results instead of being read again, when the
submit asks for it (``reuse_results``). The job says so (``reused_from``).

The page results are copied server-side into the new job's keys and its page groups are
settled; its first group's task then finds nothing to run and finishes the job the usual way
(the document assembled under the new job's id, the webhook sent).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from uocr_core import job_lifecycle, object_keys
from uocr_core.db import utcnow
from uocr_core.models import Job
from uocr_core.search import index as search_index
from uocr_core.storage import ObjectStore


def content_digest(files: list[bytes], *, pages: str | None, engine: str) -> str:
    """What makes two jobs' results the same. Lengths go first so no two inputs collide."""
    digest = hashlib.sha256(f"{engine}|{pages or ''}|{len(files)}".encode())
    for data in files:
        digest.update(b"%d:" % len(data))
        digest.update(data)
    return digest.hexdigest()


def reusable_source(session: Session, job: Job) -> Job | None:
    """The tenant's latest job with the same content whose every page succeeded and whose
    results are still kept."""
    if job.content_digest is None:
        return None
    return session.scalar(
        select(Job)
        .where(
            Job.tenant_id == job.tenant_id,
            Job.content_digest == job.content_digest,
            Job.id != job.id,
            Job.status == job_lifecycle.SUCCEEDED,
            Job.pages_failed == 0,
            Job.deleted_at.is_(None),
            Job.results_deleted_at.is_(None),
        )
        .order_by(Job.finished_at.desc())
        .limit(1)
    )


def take_earlier_results(session: Session, store: ObjectStore, job: Job) -> bool:
    """Take the results of the latest reusable job, if there is one; returns whether it did."""
    source = reusable_source(session, job)
    if source is not None:
        take_results(session, store, job, source)
    return source is not None


def take_results(session: Session, store: ObjectStore, job: Job, source: Job) -> None:
    """Copy ``source``'s page results into ``job`` (its pages and groups are planned) and
    settle every group; the caller dispatches the first group, which finishes the job."""
    now = utcnow()
    by_page = {page.page_no: page for page in source.pages}
    for page in job.pages:
        original = by_page[page.page_no]
        assert original.result_key is not None  # a succeeded page has its result
        key = object_keys.page_result_key(job.id, page.page_no)
        store.copy(original.result_key, key)
        page.status, page.result_key, page.warnings = "succeeded", key, list(original.warnings)
        # The same reading, so the same confidence and the same place on the review list.
        page.confidence, page.needs_review = original.confidence, original.needs_review
        page.started_at = page.finished_at = now
        page.duration_ms = 0
    for group in job.groups:
        group.status, group.finished_at = "done", now
    job.pages_done, job.pages_failed = len(job.pages), 0
    job.pages_flagged = sum(job_lifecycle.is_flagged(p.status, p.warnings) for p in job.pages)
    job.reused_from = source.id
    search_index.copy_job(session, source_job_id=source.id, job_id=job.id, tenant_id=job.tenant_id)
    job_lifecycle.start(job)
