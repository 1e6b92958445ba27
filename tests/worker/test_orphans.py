"""A submit refused after its upload leaves nothing: the job row goes in its own transaction,
the objects with it, and what a failed cleanup still leaves is swept after the grace."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from ocr_worker.upkeep.orphans import sweep_orphan_objects
from tests.worker.conftest import _pdf
from uocr_core import audit
from uocr_core.db import utcnow
from uocr_core.errors import ServiceUnavailable
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.models import Job


class BrokerDown:
    def enqueue_group(self, **_: object) -> str | None:
        raise ConnectionError("redis: connection refused")

    def enqueue_webhook(self, **_: object) -> None:
        raise ConnectionError("redis: connection refused")


def _job_count(harness) -> int:  # type: ignore[no-untyped-def]
    with harness.sessions() as session:
        return session.scalar(select(func.count()).select_from(Job)) or 0


def test_a_submit_refused_for_want_of_a_broker_leaves_no_row_and_no_object(harness) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ServiceUnavailable, match="nothing was kept"):
        submit_job(
            sessions=harness.sessions,
            store=harness.store,
            dispatcher=BrokerDown(),
            settings=harness.settings,
            tenant_id=harness.tenant_id,
            files=[UploadedFile("d.pdf", _pdf(2))],
            options=JobOptions(),
            actor=audit.OPERATOR,
        )
    assert _job_count(harness) == 0
    assert harness.store.keys_under("jobs/") == []
    with harness.sessions() as session:  # the audit log keeps both: taken back, not erased
        logged = [(e.action, e.target) for e in audit.events(session, audit.AuditFilter())]
    job_id = logged[-1][1]
    assert logged[-2:] == [("job.submitted", job_id), ("job.submit_refused", job_id)]


def _age_file(harness, key: str, hours: float) -> None:  # type: ignore[no-untyped-def]
    path = harness.store.root / key
    past = time.time() - hours * 3600
    os.utime(path, (past, past))


def test_objects_without_a_job_are_swept_after_the_grace_and_jobs_keep_theirs(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(2)
    kept = harness.store.keys_under(f"jobs/{job_id}/")
    harness.store.put("jobs/no-such-job/input/000.pdf", b"%PDF-")
    harness.store.put("jobs/no-such-job-yet/input/000.pdf", b"%PDF-")  # a submit in flight
    harness.store.put("inbox/t/old.pdf", b"%PDF-")
    for key in [*kept, "jobs/no-such-job/input/000.pdf", "inbox/t/old.pdf"]:
        _age_file(harness, key, 48)
    swept = sweep_orphan_objects(harness.sessions, harness.store, grace_hours=24)
    assert swept == ["jobs/no-such-job/input/000.pdf"]  # a staged inbox upload is the tenant's
    assert harness.store.exists("inbox/t/old.pdf")
    assert harness.store.keys_under(f"jobs/{job_id}/") == kept
    assert harness.store.exists("jobs/no-such-job-yet/input/000.pdf")
    later = sweep_orphan_objects(
        harness.sessions, harness.store, grace_hours=24, now=utcnow() + timedelta(hours=25)
    )
    assert later == ["jobs/no-such-job-yet/input/000.pdf"]
    expired = sweep_orphan_objects(
        harness.sessions, harness.store, grace_hours=24, inbox_retention_hours=36
    )
    assert expired == ["inbox/t/old.pdf"]  # an operator's retention for the staging area


def test_what_a_worker_writes_after_its_job_was_deleted_is_swept_at_once(harness) -> None:  # type: ignore[no-untyped-def]
    deleted, kept = harness.submit(2), harness.submit(2)
    harness.delete(deleted)
    assert harness.store.keys_under(f"jobs/{deleted}/") == []
    late = f"jobs/{deleted}/pages/00001.json"  # a worker still running wrote it after
    harness.store.put(late, b"{}")
    assert sweep_orphan_objects(harness.sessions, harness.store, grace_hours=24) == [late]
    assert harness.store.keys_under(f"jobs/{kept}/")  # a live job's objects stay
