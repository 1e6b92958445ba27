from __future__ import annotations

import pytest

from ocr_api.core import job_lifecycle as lifecycle
from ocr_api.core.models import Job


def _job(status: str = "queued", pages: int = 3, failed: int = 0) -> Job:
    return Job(id="j", status=status, page_count=pages, pages_failed=failed, cancel_requested=False)


def test_a_queued_job_cancels_at_once_and_a_running_one_on_request() -> None:
    queued, running = _job(), _job("running")
    lifecycle.request_cancel(queued)
    lifecycle.request_cancel(running)
    assert queued.status == "canceled" and queued.finished_at is not None
    assert running.status == "running" and running.cancel_requested


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
