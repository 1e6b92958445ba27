"""Recording a decoded group, if it is still ours: each page's result written to its fixed key,
then, under the job's and the group's row locks, the page rows marked with their results and
the group done, and the read pages put in the search index (uocr_core/search). The job's
counters and its progress follow when the document advances.

The objects are written before the locks are taken: a document's groups recorded at once by
several workers would otherwise queue on the job's row for every group's store calls (most of
the database's time at scale: docs/scaling.md). Checked before the writes too: a group that
overran its lease and was read elsewhere meanwhile must not overwrite its new owner's pages."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.outputs import pages
from ocr_worker.outputs.text_layer import page_lines
from ocr_worker.stages.claim import ClaimedGroup
from ocr_worker.stages.parts import StageParts
from uocr_core.contracts import PageResult
from uocr_core.db import transaction, utcnow
from uocr_core.models import Job, Page, PageGroup
from uocr_core.search import index as search_index
from uocr_core.search.index import PageLines


def record_group(
    job_id: str,
    claimed: ClaimedGroup,
    results: list[PageResult],
    parts: StageParts,
) -> bool:
    """Whether the group was recorded: not if its lease lapsed (a database outage longer than
    the lease) and another worker claimed it since. A lapsed lease whose group nobody claimed
    yet is still recorded: the work is done."""
    if not _still_ours(parts.sessions, claimed):
        return False
    searched = _searched(results) if parts.settings.search.index_pages else []
    keys = pages.write_pages(parts.store, job_id, results)
    with transaction(parts.sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
        group = session.get(PageGroup, claimed.group_id, with_for_update=True)
        assert group is not None and job is not None
        if group.status != "pending" and group.lease_owner != claimed.lease_token:
            return False  # taken over between the check and the lock (as in _still_ours)
        now = utcnow()
        group.finished_at, group.lease_owner = now, None
        if job.deleted_at is not None:  # deleted while it ran: keep nothing of it
            parts.store.delete(list(keys.values()))
            group.status = "canceled"
            return True  # settled: advancing finishes the job, writing nothing
        group.status = "done"
        by_page = {r.page: r for r in results}
        first = group.first_position + group.overlap  # the group's output pages, not its context
        rows = session.scalars(
            select(Page).where(
                Page.job_id == job_id, Page.position.between(first, group.last_position)
            )
        )
        # Each output page's row says its result: status, error, object key, warnings, who
        # read it and how long it took.
        recorded = set()
        for page in rows:
            if (result := by_page.get(page.page_no)) is None:
                continue
            recorded.add(page.page_no)
            page.status, page.error = result.status, result.error
            page.result_key, page.warnings = keys[page.page_no], result.warnings
            page.model_version, page.engine = result.model_version, result.engine
            page.confidence = result.confidence
            page.needs_review = _worth_a_look(result, parts.settings.review_confidence_below)
            page.finished_at = now
            page.duration_ms = result.duration_ms or int(
                (now - (page.started_at or now)).total_seconds() * 1000
            )
        # Into the search index in this transaction: findable exactly when recorded.
        search_index.add_pages(
            session,
            tenant_id=job.tenant_id,
            job_id=job_id,
            pages=[lines for lines in searched if lines.page_no in recorded],
            language=parts.settings.search.language,
        )
        return True


def _searched(results: list[PageResult]) -> list[PageLines]:
    """The read pages' lines as the search index keeps them (made before the store calls:
    the stage's own work first)."""
    return [
        PageLines(r.page, [(line.text, line.bbox) for line in page_lines(r)], r.width, r.height)
        for r in results
        if r.status == "succeeded"
    ]


def _worth_a_look(result: PageResult, confidence_below: float) -> bool:
    """A page for the review list: it failed, was read with a warning (cut, looping, empty),
    or with less confidence than the deployment accepts."""
    low = result.confidence is not None and result.confidence < confidence_below
    return result.status == "failed" or bool(result.warnings) or low


def _still_ours(sessions: sessionmaker[Session], claimed: ClaimedGroup) -> bool:
    """The claim still holds the lease, or the lease lapsed and nobody claimed the group since."""
    with sessions() as session:
        status, owner = session.execute(
            select(PageGroup.status, PageGroup.lease_owner).where(PageGroup.id == claimed.group_id)
        ).one()
    return status == "pending" or owner == claimed.lease_token
