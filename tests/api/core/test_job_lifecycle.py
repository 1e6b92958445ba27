from __future__ import annotations

import pytest

from uocr_core import job_lifecycle as lifecycle
from uocr_core.models import Job, Page, PageGroup


def _job(status: str = "queued", pages: int = 3, failed: int = 0) -> Job:
    return Job(id="j", status=status, page_count=pages, pages_failed=failed, cancel_requested=False)


def _with_rows(job: Job, page_statuses: list[str], group_statuses: list[str]) -> Job:
    job.pages = [Page(page_no=n, status=s) for n, s in enumerate(page_statuses, start=1)]
    job.groups = [PageGroup(group_index=i, status=s) for i, s in enumerate(group_statuses)]
    job.pages_done = sum(s in ("succeeded", "failed") for s in page_statuses)
    return job


def test_a_queued_job_cancels_at_once_and_a_running_one_on_request() -> None:
    queued, running = _job(), _job("running")
    lifecycle.request_cancel(queued)
    lifecycle.request_cancel(running)
    assert queued.status == "canceled" and queued.finished_at is not None
    assert running.status == "running" and running.cancel_requested


def test_a_canceled_job_lists_its_unstarted_pages_and_groups_as_canceled() -> None:
    job = _with_rows(
        _job("running", pages=5), ["succeeded"] * 3 + ["pending"] * 2, ["done", "pending"]
    )
    lifecycle.finish_canceled(job)
    assert job.status == "canceled"
    assert [p.status for p in job.pages] == ["succeeded"] * 3 + ["canceled"] * 2
    assert [g.status for g in job.groups] == ["done", "canceled"]


def test_regression_late_cancel_on_the_last_group_ends_succeeded_not_canceled() -> None:
    job = _with_rows(_job("running", pages=3), ["succeeded"] * 3, ["done"])
    job.cancel_requested = True
    lifecycle.finish_canceled(job)
    assert job.status == "succeeded" and job.finished_at is not None


def test_a_batch_document_not_read_yet_has_nothing_settled_and_is_canceled() -> None:
    job = _job(pages=0)
    lifecycle.finish_canceled(job)
    assert job.status == "canceled"


def test_delete_cancels_an_unfinished_job_and_keeps_a_tombstone() -> None:
    queued, running, done = _job(), _job("running"), _job("succeeded")
    for job in (queued, running, done):
        lifecycle.delete(job, deleted_by="acme")
    assert queued.status == "canceled"
    assert running.status == "running" and running.cancel_requested
    assert done.status == "succeeded" and not done.cancel_requested
    assert all(j.deleted_at is not None and j.deleted_by == "acme" for j in (queued, done))


def test_finish_fails_only_when_no_page_succeeded() -> None:
    partly, wholly = _job("running", failed=1), _job("running", failed=3)
    lifecycle.finish(partly)
    lifecycle.finish(wholly)
    assert partly.status == "succeeded"
    assert wholly.status == "failed" and wholly.error == "every page failed"


def test_a_finished_job_cannot_move_again() -> None:
    job = _job("succeeded")
    with pytest.raises(lifecycle.InvalidTransition, match="succeeded -> running"):
        lifecycle.start(job)
