"""The one writer of a job's status. Every transition goes through here; a wrong one raises."""

from __future__ import annotations

from uocr_core.db import utcnow
from uocr_core.models import Job

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "canceled",
)
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELED})
UNFINISHED = frozenset({QUEUED, RUNNING})
# A page group's statuses (pending, running, then these): finished once its pages are written,
# each with its own outcome; settled once no task will run it any more.
GROUP_FINISHED = frozenset({"done", "failed"})
GROUP_SETTLED = GROUP_FINISHED | {"canceled"}

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
    """Canceled now: page groups not yet run never will be, and their pages say so (a client
    polling them must not wait for ever). A job whose every page is settled ends with its
    outcome instead: a cancel that came in while its last group ran stopped nothing."""
    if every_page_settled(job):
        finish(job)
        return
    _move(job, CANCELED)
    job.finished_at = utcnow()
    for group in job.groups:
        if group.status == "pending":
            group.status = CANCELED
    for page in job.pages:
        if page.status in ("pending", "running"):
            page.status = CANCELED


def delete(job: Job, *, deleted_by: str) -> None:
    """DELETE: an unfinished job is canceled as by a cancel request; the record stays as a
    tombstone saying when and by whom (its objects are the caller's to remove)."""
    if job.status not in TERMINAL:
        request_cancel(job)
    job.deleted_at, job.deleted_by = utcnow(), deleted_by


def every_page_settled(job: Job) -> bool:
    """Every page succeeded or failed (the counters the pipeline keeps under the job's lock).
    A job with no pages yet (a batch document not read) has nothing settled."""
    return job.page_count > 0 and (job.pages_done or 0) >= job.page_count


def is_flagged(status: str, warnings: list[str]) -> bool:
    """A page read, but with a warning a reader should look at (``Job.pages_flagged``)."""
    return status == SUCCEEDED and bool(warnings)


def outcome(job: Job) -> str:
    """The status a job whose pages are all settled ends with: failed only if no page succeeded."""
    return FAILED if job.pages_failed >= job.page_count else SUCCEEDED


def settled_status(job: Job, *, canceled: bool) -> str:
    """The status a job ends with once no group runs any more: canceled if a cancel stopped it
    before every page was settled, else its outcome."""
    return CANCELED if canceled and not every_page_settled(job) else outcome(job)


def settle(job: Job, *, canceled: bool) -> None:
    """No group runs any more: the job ends, canceled or with its outcome."""
    if canceled:
        finish_canceled(job)
    else:
        finish(job)


def finish(job: Job) -> None:
    """All pages are settled: the job ends with its outcome."""
    target = outcome(job)
    _move(job, target)
    if target == FAILED:
        job.error = job.error or "every page failed"
    job.finished_at = utcnow()
