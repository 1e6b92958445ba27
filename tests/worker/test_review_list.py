"""The review list (uocr_core/jobs/review.py) as the record stage fills it: a page that failed,
was read with a warning or with low confidence is on its tenant's list, oldest first, until
someone marks it reviewed (audited); a clean page never is, and no tenant sees another's."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ocr_worker.engines.base import OcrEngine, PageGroupInput
from ocr_worker.upkeep.recovery import recover_stale_groups
from tests.worker.conftest import ScriptedEngine
from tests.worker.test_pipeline import _expire_leases
from uocr_core import audit
from uocr_core.contracts import PageResult
from uocr_core.db import transaction
from uocr_core.errors import NotFound
from uocr_core.jobs.review import mark_reviewed, pages_to_review
from uocr_core.models import AuditEvent


class ReviewedEngine(OcrEngine):
    """Page 1 clean; 2 read with low confidence; 3 caught looping; 4 failed; 5 no score."""

    name = "scripted"

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        results = []
        for page in group.pages:
            result = PageResult(page=page.page_no, status="succeeded", text="x", confidence=0.97)
            if page.page_no == 2:
                result.confidence = 0.61
            elif page.page_no == 3:
                result.warnings = ["repetition_loop"]
            elif page.page_no == 4:
                result = PageResult(page=4, status="failed", error="page 4 is damaged")
            elif page.page_no == 5:
                result.confidence = None
            results.append(result)
        return results


def _listed(harness, **kwargs) -> list[int]:  # type: ignore[no-untyped-def]
    with harness.sessions() as session:
        found = pages_to_review(session, tenant_id=harness.tenant_id, **kwargs)
        return [item.page.page_no for item in found.items]


def test_pages_worth_a_look_are_listed_oldest_first_until_marked_reviewed(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    harness.drain(ReviewedEngine())
    assert _listed(harness) == [2, 3, 4]
    # Paged: one at a time, the cursor going on where the last page stopped.
    with harness.sessions() as session:
        first = pages_to_review(session, tenant_id=harness.tenant_id, limit=1)
        assert [i.page.page_no for i in first.items] == [2] and first.next_cursor
        rest = pages_to_review(session, tenant_id=harness.tenant_id, cursor=first.next_cursor)
        assert [i.page.page_no for i in rest.items] == [3, 4] and rest.next_cursor is None
        assert first.items[0].page.confidence == pytest.approx(0.61)

    reviewer = audit.Actor("tenant:t key:abc", harness.tenant_id)
    with transaction(harness.sessions) as session:
        mark_reviewed(
            session, tenant_id=harness.tenant_id, job_id=job_id, page_no=3, actor=reviewer
        )
    assert _listed(harness) == [2, 4]
    with harness.sessions() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "page.reviewed"))
        assert [(e.actor, e.target) for e in events] == [(reviewer.name, f"{job_id}/3")]


def test_no_tenant_sees_or_marks_another_tenants_pages(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    harness.drain(ReviewedEngine())
    with harness.sessions() as session:
        assert pages_to_review(session, tenant_id="another").items == []
    with transaction(harness.sessions) as session, pytest.raises(NotFound):
        mark_reviewed(session, tenant_id="another", job_id=job_id, page_no=2, actor=audit.OPERATOR)
    assert _listed(harness) == [2, 3, 4]


def test_pages_of_a_group_given_up_are_on_the_list(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(3)  # one group of three pages
    pipeline = harness.pipeline(ScriptedEngine(crash_groups=5))
    for _ in range(2):  # both attempts crash; the third delivery finds the cap reached
        with pytest.raises(RuntimeError, match="device lost"):
            pipeline.run(*harness.dispatcher.groups.popleft())
        _expire_leases(harness)
        recover_stale_groups(harness.sessions, harness.dispatcher)
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).pages_failed == 3
    assert _listed(harness) == [1, 2, 3]
