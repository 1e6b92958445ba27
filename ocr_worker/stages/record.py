"""Recording a decoded group, if it is still ours: its page rows marked with their results and
the group done, and each page's result written to its fixed key before that commits.

Recorded under the job's and the group's row locks: the lease is checked, the rows marked and
the objects written in one transaction, so a group whose lease lapsed and that another worker
claimed since never overwrites its new owner's pages, and a write that fails marks nothing.
The job's counters and its progress follow when the document advances."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ocr_worker.outputs import pages
from ocr_worker.stages.claim import ClaimedGroup
from ocr_worker.stages.parts import StageParts
from uocr_core.contracts import PageResult
from uocr_core.db import transaction, utcnow
from uocr_core.models import Job, Page, PageGroup


def record_group(
    job_id: str,
    claimed: ClaimedGroup,
    results: list[PageResult],
    parts: StageParts,
) -> bool:
    """Whether the group was recorded: not if its lease lapsed (a database outage longer than
    the lease) and another worker claimed it since. A lapsed lease whose group nobody claimed
    yet is still recorded: the work is done."""
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        group = session.get(PageGroup, claimed.group_id, with_for_update=True)
        assert group is not None and job is not None
        if group.status != "pending" and group.lease_owner != claimed.lease_token:
            return False
        now = utcnow()
        group.finished_at, group.lease_owner = now, None
        if job.deleted_at is not None:  # deleted while it ran: keep nothing of it
            group.status = "canceled"
            return True  # settled: advancing finishes the job, writing nothing
        group.status = "done"
        rows = _output_pages(session, group)
        keys = pages.write_pages(parts.store, job_id, results)
        by_page = {r.page: r for r in results}
        # Each output page's row says its result: status, error, object key, warnings, who
        # read it and how long it took.
        for page in rows:
            if (result := by_page.get(page.page_no)) is None:
                continue
            page.status, page.error = result.status, result.error
            page.result_key, page.warnings = keys[page.page_no], result.warnings
            page.model_version, page.engine = result.model_version, result.engine
            page.finished_at = now
            page.duration_ms = result.duration_ms or int(
                (now - (page.started_at or now)).total_seconds() * 1000
            )
        return True


def _output_pages(session: Session, group: PageGroup) -> list[Page]:
    """The pages a group outputs (its context pages excluded)."""
    first = group.first_position + group.overlap
    return list(
        session.scalars(
            select(Page)
            .where(Page.job_id == group.job_id, Page.position.between(first, group.last_position))
            .order_by(Page.position)
        )
    )
