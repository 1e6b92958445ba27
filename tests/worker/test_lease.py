"""Leases are held per claim: a lapsed and re-claimed group is recorded by its new owner only,
a transient failure gives the group back at once instead of waiting for the lease, and a group
stuck in its thread is let go at its time limit."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy.exc
from sqlalchemy import select
from structlog.testing import capture_logs

from ocr_worker.engines.base import PageGroupInput
from ocr_worker.outputs.readback import load_page_results
from ocr_worker.pipeline import PageGroupPipeline
from ocr_worker.stages.lease import LeaseKeeper
from ocr_worker.upkeep.recovery import recover_stale_groups
from tests.worker.conftest import ScriptedEngine
from uocr_core.contracts import PageResult
from uocr_core.db import transaction
from uocr_core.models import PageGroup


def _group(harness, job_id: str, index: int = 0) -> PageGroup:  # type: ignore[no-untyped-def]
    with harness.sessions() as session:
        return session.scalars(
            select(PageGroup).where(PageGroup.job_id == job_id, PageGroup.group_index == index)
        ).one()


def test_a_claim_whose_lease_was_taken_over_records_nothing(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(2)
    old = harness.pipeline(ScriptedEngine())
    claimed = old._claim(job_id, 0)
    assert not isinstance(claimed, str)
    with transaction(harness.sessions) as session:  # the lease lapsed; another worker claimed
        group = session.get(PageGroup, claimed.group_id)
        assert group is not None
        group.lease_owner = "other-worker/0000"
    results = old._decode(job_id, claimed)
    assert old._record(job_id, claimed, results) is False
    assert _group(harness, job_id).status == "running"  # still the new owner's
    keeper = LeaseKeeper(
        harness.sessions, group_id=claimed.group_id, owner=claimed.lease_token, lease_seconds=5
    )
    assert keeper.renew() is False  # and the old owner cannot renew it either


def test_every_claim_gets_its_own_token(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    pipeline = harness.pipeline(ScriptedEngine())
    first, second = pipeline._claim(job_id, 0), pipeline._claim(job_id, 1)
    assert not isinstance(first, str) and not isinstance(second, str)
    assert first.lease_token != second.lease_token
    assert first.lease_token.startswith("test/")


class DatabaseDownEngine(ScriptedEngine):
    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))


def test_a_transient_failure_gives_the_group_back_without_counting_an_attempt(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(2)
    pipeline = harness.pipeline(DatabaseDownEngine())
    with pytest.raises(sqlalchemy.exc.OperationalError):
        pipeline.run(*harness.dispatcher.groups.popleft())
    group = _group(harness, job_id)
    assert (group.status, group.attempts, group.lease_owner) == ("pending", 0, None)
    assert {p.status for p in harness.job(job_id).pages} == {"pending"}
    harness.pipeline(ScriptedEngine()).run(job_id, 0)  # the retry claims it at once
    assert harness.job(job_id).status == "succeeded"


def test_a_claim_that_could_not_be_given_back_is_given_back_by_the_next_task(
    harness, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    import ocr_worker.stages.lease as pipeline_module

    job_id = harness.submit(2)
    pipeline = harness.pipeline(DatabaseDownEngine())
    real_release = pipeline_module.release_claim

    def database_still_down(*_: object, **__: object) -> bool:
        raise sqlalchemy.exc.OperationalError("UPDATE", {}, Exception("connection refused"))

    monkeypatch.setattr(pipeline_module, "release_claim", database_still_down)
    with pytest.raises(sqlalchemy.exc.OperationalError):
        pipeline.run(*harness.dispatcher.groups.popleft())
    assert _group(harness, job_id).status == "running"  # still leased: release failed
    monkeypatch.setattr(pipeline_module, "release_claim", real_release)
    pipeline.engine = ScriptedEngine()
    assert pipeline.run(job_id, 0) == "ran"  # the retry gives it back, then claims it at once
    assert harness.job(job_id).status == "succeeded"


def test_a_keeper_ticking_after_its_group_was_recorded_reports_no_lost_lease(harness) -> None:  # type: ignore[no-untyped-def]
    """Seen at 128 groups on the H200: the group's record (done, no owner) committed just
    before its keeper stopped, whose next tick then warned of a lease taken over."""
    job_id = harness.submit(4)  # groups [1 2 3] and [3 | 4]
    pipeline = harness.pipeline(ScriptedEngine())
    claimed = pipeline._claim(job_id, 0)
    assert not isinstance(claimed, str)
    keeper = LeaseKeeper(
        harness.sessions, group_id=claimed.group_id, owner=claimed.lease_token, lease_seconds=5
    )
    assert pipeline._record(job_id, claimed, pipeline._decode(job_id, claimed)) is True
    assert keeper.renew() is False and keeper.lost() is False  # settled, not lost
    with transaction(harness.sessions) as session:  # whereas a group another worker holds is
        group = session.get(PageGroup, claimed.group_id)
        assert group is not None
        group.status, group.lease_owner = "running", "other-worker/0000"
    assert keeper.lost() is True
    # The keeper's own loop, ticking across the record: it stops, and warns of nothing.
    second = pipeline._claim(job_id, 1)
    assert not isinstance(second, str)
    ticking = LeaseKeeper(
        harness.sessions, group_id=second.group_id, owner=second.lease_token, lease_seconds=1
    )
    with capture_logs() as logs:
        ticking._thread.start()
        time.sleep(0.5)  # a renewal while the group runs
        renewed = ticking.renewals
        assert pipeline._record(job_id, second, pipeline._decode(job_id, second)) is True
        ticking._thread.join(5)
    assert renewed >= 1 and not ticking._thread.is_alive()  # renewed, then stopped by itself
    assert [e for e in logs if e["event"] == "lease.lost"] == []


class HangingEngine(ScriptedEngine):
    """A call that never comes back on its own: a wedged driver, a render that never ends."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        self.release.wait(60)
        return [r.model_copy(update={"text": "stale"}) for r in super().run_group(group)]


def test_a_group_stuck_in_its_thread_is_let_go_at_its_time_limit_and_runs_elsewhere(
    harness,
) -> None:  # type: ignore[no-untyped-def]
    """On a threads pool Celery's time limits do nothing; the lease is renewed for the group's
    time limit at most (here 1 s + 1 s a page: 3 s for 2 pages), then lapses."""
    worker = harness.settings.worker.model_copy(
        update={
            "lease_seconds": 1,
            "group_time_limit_base_seconds": 1,
            "group_time_limit_per_page_seconds": 1,
        }
    )
    settings = harness.settings.model_copy(update={"request_timeout_seconds": 1, "worker": worker})
    job_id = harness.submit(2)
    engine = HangingEngine()
    stuck = PageGroupPipeline(
        sessions=harness.sessions,
        store=harness.store,
        engine=engine,
        dispatcher=harness.dispatcher,
        settings=settings,
        worker_id="stuck",
    )
    outcome: list[str] = []
    task = threading.Thread(
        target=lambda: outcome.append(stuck.run(*harness.dispatcher.groups.popleft())), daemon=True
    )
    started = time.monotonic()
    with capture_logs() as logs:
        task.start()
        while not recover_stale_groups(harness.sessions, harness.dispatcher):
            assert time.monotonic() - started < 20, "the stuck group's lease never lapsed"
            time.sleep(0.2)
    assert time.monotonic() - started > 3  # not before its time limit
    assert any(line["event"] == "page_group.overran" for line in logs)
    harness.drain(ScriptedEngine())  # another worker reads it
    assert harness.job(job_id).status == "succeeded"
    engine.release.set()  # the stuck call comes back at last: it records nothing
    task.join(30)
    assert outcome == ["lease_lost"]
    assert _group(harness, job_id).attempts == 2
    texts = [r.text for r in load_page_results(harness.store, harness.job(job_id))]
    assert texts == ["text of page 1", "text of page 2"]  # the new owner's, not overwritten
