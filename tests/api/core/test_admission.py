"""The admission plan: a tenant's backlog never takes another tenant's turn, interactive work
goes first, and the broker never holds more than the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from uocr_core.admission import WaitingJob, plan_admission

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def _jobs(
    tenant: str, count: int, *, interactive: bool = False, start: int = 0
) -> list[WaitingJob]:
    return [
        WaitingJob(f"{tenant}-{i}", tenant, interactive, T0 + timedelta(seconds=start + i))
        for i in range(count)
    ]


def test_a_big_backlog_and_a_late_small_one_take_turns() -> None:
    archive = _jobs("archive", 1000)
    late = _jobs("late", 3, start=5000)  # submitted long after the archive's batch
    plan = plan_admission(archive + late, {}, window=6, tenant_cap=100)
    assert plan.job_ids == ["archive-0", "late-0", "archive-1", "late-1", "archive-2", "late-2"]
    assert plan.room_left == 0


def test_interactive_work_is_admitted_before_any_backlog() -> None:
    backlog = _jobs("archive", 50)
    app = _jobs("app", 2, interactive=True, start=100)
    plan = plan_admission(backlog + app, {"archive": 3}, window=6, tenant_cap=10)
    assert plan.job_ids[:2] == ["app-0", "app-1"]
    assert plan.job_ids[2:] == ["archive-0"]  # 3 in flight + 3 admitted = the window


def test_a_tenant_at_its_cap_waits_while_others_go() -> None:
    plan = plan_admission(
        _jobs("archive", 10) + _jobs("lab", 10), {"archive": 4}, window=100, tenant_cap=4
    )
    assert plan.job_ids == [f"lab-{i}" for i in range(4)]
    assert plan.room_left == 100 - 8


def test_nothing_is_admitted_when_the_window_is_full() -> None:
    plan = plan_admission(_jobs("a", 3), {"a": 2, "b": 5}, window=7, tenant_cap=10)
    assert plan.job_ids == [] and plan.room_left == 0


def test_the_tenant_with_less_in_flight_goes_first() -> None:
    plan = plan_admission(
        _jobs("busy", 5) + _jobs("idle", 5, start=10), {"busy": 3}, window=5, tenant_cap=10
    )
    assert plan.job_ids == ["idle-0", "idle-1"]
    more = plan_admission(
        _jobs("busy", 5) + _jobs("idle", 5, start=10), {"busy": 3}, window=9, tenant_cap=10
    )
    assert more.job_ids == ["idle-0", "idle-1", "idle-2", "busy-0", "idle-3", "busy-1"]
