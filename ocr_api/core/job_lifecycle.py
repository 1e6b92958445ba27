"""The one writer of a job's status. Every transition goes through here; a wrong one raises."""

from __future__ import annotations

from ocr_api.core.db import utcnow
from ocr_api.core.models import Job

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "canceled",
)
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELED})

_ALLOWED: dict[str, frozenset[str]] = {
    QUEUED: frozenset({RUNNING, CANCELED, FAILED}),
    RUNNING: frozenset({SUCCEEDED, FAILED, CANCELED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELED: frozenset(),
}


class InvalidTransition(RuntimeError):
    pass


def _move(job: Job, target: str) -> None:
    if target not in _ALLOWED[job.status]:
        raise InvalidTransition(f"job {job.id}: {job.status} -> {target} is not allowed")
    job.status = target


def start(job: Job) -> None:
    if job.status == RUNNING:
        return  # a redelivered or following group: already running
    _move(job, RUNNING)
    job.started_at = utcnow()


def request_cancel(job: Job) -> None:
    """A queued job is canceled at once; a running one stops after its current page group."""
    if job.status == QUEUED:
        finish_canceled(job)
    elif job.status == RUNNING:
        job.cancel_requested = True


def finish_canceled(job: Job) -> None:
    """Canceled now: page groups not yet run never will be."""
    _move(job, CANCELED)
    job.finished_at = utcnow()
    for group in job.groups:
        if group.status == "pending":
            group.status = "canceled"


def outcome(job: Job) -> str:
    """The status a job whose pages are all settled ends with: failed only if no page succeeded."""
    return FAILED if job.pages_failed >= job.page_count else SUCCEEDED


def finish(job: Job) -> None:
    """All pages are settled: the job ends with its outcome."""
    target = outcome(job)
    _move(job, target)
    if target == FAILED:
        job.error = job.error or "every page failed"
    job.finished_at = utcnow()
