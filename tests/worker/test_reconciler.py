"""The reconciler against Postgres-shaped state on SQLite: work with no live task is dispatched
again, work that is waiting or running is left alone (milliseconds per test)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from ocr_worker.upkeep.reconciler import Reconciler
from tests.worker.conftest import ScriptedEngine
from uocr_core.db import transaction, utcnow
from uocr_core.models import Job, PageGroup


class FakeWaiting:
    def __init__(self) -> None:
        self.ids: set[str] = set()

    def task_ids(self) -> set[str]:
        return set(self.ids)


def _reconciler(harness, waiting: FakeWaiting, parallel: bool = False) -> Reconciler:  # type: ignore[no-untyped-def]
    return Reconciler(
        harness.sessions,
        harness.dispatcher,
        waiting,
        redispatch_after_seconds=60,
        parallel_groups=parallel,
    )


def _age(harness, job_id: str, seconds: int) -> None:  # type: ignore[no-untyped-def]
    """Move the job's dispatch and finish times into the past."""
    past = utcnow() - timedelta(seconds=seconds)
    with transaction(harness.sessions) as session:
        session.execute(update(Job).where(Job.id == job_id).values(created_at=past))
        for group in session.scalars(select(PageGroup).where(PageGroup.job_id == job_id)):
            group.enqueued_at = group.enqueued_at and past
            group.finished_at = group.finished_at and past


def _set_task_id(harness, job_id: str, group_index: int, task_id: str) -> None:  # type: ignore[no-untyped-def]
    with transaction(harness.sessions) as session:
        session.execute(
            update(PageGroup)
            .where(PageGroup.job_id == job_id, PageGroup.group_index == group_index)
            .values(task_id=task_id)
        )


def test_a_lost_message_is_dispatched_again_after_the_grace_and_the_job_completes(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    harness.dispatcher.groups.clear()  # Redis restarted: the message is gone
    waiting = FakeWaiting()
    assert _reconciler(harness, waiting).run() == []  # dispatched just now: not yet
    _age(harness, job_id, 120)
    assert _reconciler(harness, waiting).run() == [f"{job_id}:0"]
    assert list(harness.dispatcher.groups) == [(job_id, 0)]
    assert _reconciler(harness, waiting).run() == []  # the new dispatch is recent
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).status == "succeeded"


def test_a_message_waiting_in_the_queue_is_left_alone_however_old(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    _set_task_id(harness, job_id, 0, "task-0")
    _age(harness, job_id, 3600)
    waiting = FakeWaiting()
    waiting.ids.add("task-0")
    assert _reconciler(harness, waiting).run() == []
    waiting.ids.clear()  # a worker took it and died before claiming
    assert _reconciler(harness, waiting).run() == [f"{job_id}:0"]


def test_a_group_its_finished_predecessor_never_queued_is_dispatched(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    pipeline = harness.pipeline(ScriptedEngine())
    pipeline.run(*harness.dispatcher.groups.popleft())  # group 0 ran and queued group 1 ...
    harness.dispatcher.groups.clear()
    with transaction(harness.sessions) as session:  # ... but the worker died before it
        session.execute(
            update(PageGroup)
            .where(PageGroup.job_id == job_id, PageGroup.group_index == 1)
            .values(enqueued_at=None, task_id=None)
        )
    waiting = FakeWaiting()
    assert _reconciler(harness, waiting).run() == []  # group 0 just finished
    _age(harness, job_id, 120)
    assert _reconciler(harness, waiting).run() == [f"{job_id}:1"]
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).pages_done == 5


def test_a_job_whose_groups_all_settled_but_never_finished_is_advanced(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(2)
    pipeline = harness.pipeline(ScriptedEngine())
    claimed = pipeline._claim(job_id, 0)
    assert not isinstance(claimed, str)
    pipeline._record(job_id, claimed, pipeline._decode(job_id, claimed))  # died before advancing
    harness.dispatcher.groups.clear()
    _age(harness, job_id, 120)
    assert _reconciler(harness, FakeWaiting()).run() == [f"{job_id}:0"]
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).status == "succeeded"


def test_a_running_group_is_not_the_reconcilers(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(2)
    pipeline = harness.pipeline(ScriptedEngine())
    assert not isinstance(pipeline._claim(job_id, 0), str)
    _age(harness, job_id, 600)
    assert _reconciler(harness, FakeWaiting()).run() == []


@pytest.mark.parametrize("harness", [{"parallel_page_groups": True}], indirect=True)
def test_parallel_groups_lost_together_are_all_dispatched_again(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    harness.dispatcher.groups.clear()
    _age(harness, job_id, 120)
    dispatched = _reconciler(harness, FakeWaiting(), parallel=True).run()
    assert dispatched == [f"{job_id}:{n}" for n in range(3)]
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).pages_done == 7


def test_a_pending_webhook_whose_message_was_lost_is_sent_again(harness) -> None:  # type: ignore[no-untyped-def]
    from uocr_core.models import WebhookDelivery

    job_id = harness.submit(2)
    sent: list[str] = []
    harness.dispatcher.enqueue_webhook = lambda *, delivery_id, countdown=0: sent.append(
        delivery_id
    )
    with transaction(harness.sessions) as session:
        session.add(
            WebhookDelivery(
                id="d1",
                job_id=job_id,
                event_type="job.succeeded",
                url="http://example.com/h",
                body="{}",
                created_at=utcnow() - timedelta(hours=2),
            )
        )
        session.add(
            WebhookDelivery(id="d2", job_id=job_id, event_type="job.succeeded", url="u", body="{}")
        )
    reconciler = _reconciler(harness, FakeWaiting())
    assert "webhook:d1" in reconciler.run()
    assert sent == ["d1"]  # d2 was created just now: its message is still due
