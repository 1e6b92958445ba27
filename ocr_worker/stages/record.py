"""Recording a decoded group: its pages written to their fixed keys, then their rows marked
done, the job's counters recounted and its progress written, if the group is still ours."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.outputs import assembly
from ocr_worker.stages import rows
from ocr_worker.stages.claim import ClaimedGroup
from ocr_worker.stages.parts import StageParts
from uocr_core.contracts import PageResult
from uocr_core.db import transaction, utcnow
from uocr_core.models import Job, PageGroup


def record_group(
    job_id: str,
    claimed: ClaimedGroup,
    results: list[PageResult],
    parts: StageParts,
) -> bool:
    """Mark the pages done, if the group is still ours: not if its lease lapsed (a database
    outage longer than the lease) and another worker claimed it since. A lapsed lease whose
    group nobody claimed yet is still recorded: the work is done. Checked before the pages
    are written too: their objects are at fixed keys, and a group that overran its time
    limit and was read elsewhere meanwhile must not overwrite its new owner's pages."""
    sessions, store = parts.sessions, parts.store
    if not still_ours(sessions, claimed):
        return False
    keys = assembly.write_pages(store, job_id, results)
    with transaction(sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        group = session.get(PageGroup, claimed.group_id, with_for_update=True)
        assert group is not None and job is not None
        if not ours(group.status, group.lease_owner, claimed):
            return False
        if job.deleted_at is not None:  # deleted while it ran: keep nothing of it
            store.delete(list(keys.values()))
            group.status, group.finished_at, group.lease_owner = "canceled", utcnow(), None
            return True  # settled: advancing finishes the job, writing nothing
        now = utcnow()
        _mark_pages(session, group, results, keys, now)
        group.status, group.finished_at, group.lease_owner = "done", now, None
        rows.recount(session, job)
        assembly.write_progress(store, job)
        return True


def _mark_pages(
    session: Session,
    group: PageGroup,
    results: list[PageResult],
    keys: dict[int, str],
    now: datetime,
) -> None:
    """Each output page's row says its result: status, error, object key, warnings, who read
    it and how long it took."""
    results_by_page = {r.page: r for r in results}
    for page in rows.group_pages(session, group):
        result = results_by_page.get(page.page_no)
        if result is None:
            continue
        page.status, page.error = result.status, result.error
        page.result_key, page.warnings = keys[page.page_no], result.warnings
        page.model_version, page.engine = result.model_version, result.engine
        page.finished_at = now
        page.duration_ms = result.duration_ms or int(
            (now - (page.started_at or now)).total_seconds() * 1000
        )


def still_ours(sessions: sessionmaker[Session], claimed: ClaimedGroup) -> bool:
    with sessions() as session:
        status, owner = session.execute(
            select(PageGroup.status, PageGroup.lease_owner).where(PageGroup.id == claimed.group_id)
        ).one()
    return ours(status, owner, claimed)


def ours(status: str, owner: str | None, claimed: ClaimedGroup) -> bool:
    """Whether ``claimed`` may record the group: it still holds the lease, or the lease lapsed
    and nobody claimed the group since."""
    return status == "pending" or owner == claimed.lease_token
