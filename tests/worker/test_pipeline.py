"""The page-group pipeline's bookkeeping on SQLite and a folder store (milliseconds per test).

The engine here is a scripted stand-in so each test controls exactly what decoding returns;
the real engines run in tests/worker/test_rapidocr.py and the end-to-end tests.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable

import pytest
from sqlalchemy import select

from ocr_worker.engines.base import PageGroupInput
from ocr_worker.outputs.readback import load_page_results
from ocr_worker.upkeep.recovery import recover_stale_groups
from tests.worker.conftest import ScriptedEngine
from uocr_core import audit, object_keys
from uocr_core.contracts import PageResult
from uocr_core.db import transaction
from uocr_core.jobs.service import cancel_job
from uocr_core.models import Job, Page, PageGroup


def test_groups_run_in_order_with_the_boundary_page_as_context(harness) -> None:  # type: ignore[no-untyped-def]
    engine = ScriptedEngine()
    job_id = harness.submit(7)
    harness.drain(engine)
    assert engine.calls == [([], [1, 2, 3]), ([3], [4, 5]), ([5], [6, 7])]
    job = harness.job(job_id)
    assert (job.status, job.pages_done, job.pages_failed) == ("succeeded", 7, 0)
    texts = [r.text for r in load_page_results(harness.store, job)]
    assert texts == [f"text of page {n}" for n in range(1, 8)]


@pytest.mark.parametrize("harness", [{"render_processes": 2}], indirect=True)
def test_pages_can_render_in_cpu_processes_beside_the_engine(harness) -> None:  # type: ignore[no-untyped-def]
    class SizeEngine(ScriptedEngine):
        def run_group(self, group: PageGroupInput) -> list[PageResult]:
            return [
                PageResult(page=p.page_no, status="succeeded", text=str(p.pixels.shape))
                for p in group.pages
            ]

    job_id = harness.submit(4)
    pipeline = harness.pipeline(SizeEngine())
    assert pipeline.render_pool is not None
    while harness.dispatcher.groups:
        pipeline.run(*harness.dispatcher.groups.popleft())
    texts = [r.text for r in load_page_results(harness.store, harness.job(job_id))]
    assert texts == ["(139, 139, 3)"] * 4  # 200 pt pages at 50 dpi, rendered in the pool


@pytest.mark.parametrize("harness", [{"render_processes": 2}], indirect=True)
def test_the_searchable_pdf_is_built_in_the_render_processes(  # type: ignore[no-untyped-def]
    harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyMuPDF holds the GIL for a whole build (~15 ms a page): in a GPU worker that stalls
    the decode loop. With render processes, the worker's own process never builds it."""
    import pymupdf

    from ocr_worker.outputs import document

    def not_here(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the searchable PDF was built in the worker's process")

    monkeypatch.setattr(document, "write_searchable_pdf", not_here)
    job_id = harness.submit(4)
    harness.drain(ScriptedEngine())
    assert harness.job(job_id).status == "succeeded"
    data = harness.store.get(object_keys.result_key(job_id, "pdf"))
    with pymupdf.open(stream=data, filetype="pdf") as pdf:
        assert pdf.page_count == 4


@pytest.mark.parametrize("harness", [{}, {"render_processes": 2}], indirect=True)
def test_pages_are_drawn_no_larger_than_the_engine_reads(harness) -> None:  # type: ignore[no-untyped-def]
    """The GPU engine reads 1024 pixels a side: drawing more only costs render CPU. Its pages
    come smaller, and still say the geometry their results are reported in."""

    class SmallEngine(ScriptedEngine):
        def input_long_side(self, pages: int) -> int | None:
            return 100

        def run_group(self, group: PageGroupInput) -> list[PageResult]:
            return [
                PageResult(page=p.page_no, status="succeeded", text=f"{p.pixels.shape}").model_copy(
                    update={"width": p.report_size[0], "height": p.report_size[1]}
                )
                for p in group.pages
            ]

    job_id = harness.submit(4)
    harness.drain(SmallEngine())
    results = load_page_results(harness.store, harness.job(job_id))
    assert [r.text for r in results] == ["(100, 100, 3)"] * 4  # not 139: 200 pt at 50 dpi
    assert [(r.width, r.height) for r in results] == [(139, 139)] * 4


def test_a_redelivered_group_does_nothing_twice(harness) -> None:  # type: ignore[no-untyped-def]
    engine = ScriptedEngine()
    job_id = harness.submit(4)
    pipeline = harness.pipeline(engine)
    first = harness.dispatcher.groups.popleft()
    assert pipeline.run(*first) == "ran"
    assert pipeline.run(*first) == "done"  # the same message again
    assert len(harness.dispatcher.groups) == 1  # the next group was queued once, not twice
    harness.drain(engine)
    assert [c[1] for c in engine.calls] == [[1, 2, 3], [4]]
    assert harness.job(job_id).pages_done == 4


def test_a_failed_page_is_recorded_and_the_document_completes(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(3)
    harness.drain(ScriptedEngine(failing_pages=(2,)))
    job = harness.job(job_id)
    assert (job.status, job.pages_failed) == ("succeeded", 1)
    page = next(p for p in job.pages if p.page_no == 2)
    assert (page.status, page.error) == ("failed", "unreadable")
    results = load_page_results(harness.store, job)
    assert [r.status for r in results] == ["succeeded", "failed", "succeeded"]


def test_a_group_that_keeps_crashing_is_given_up_and_the_rest_goes_on(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(5)
    pipeline = harness.pipeline(ScriptedEngine(crash_groups=5))
    for _ in range(2):  # two attempts, each crashing; recovery re-queues after the lease
        group = harness.dispatcher.groups.popleft()
        with pytest.raises(RuntimeError, match="device lost"):
            pipeline.run(*group)
        _expire_leases(harness)
        assert recover_stale_groups(harness.sessions, harness.dispatcher) == [f"{job_id}:0"]
    harness.drain(ScriptedEngine())  # the third delivery finds the cap reached
    job = harness.job(job_id)
    assert job.status == "succeeded" and job.pages_failed == 3
    assert all("gave up after 2 attempts" in (p.error or "") for p in job.pages[:3])
    assert [p.status for p in job.pages[3:]] == ["succeeded", "succeeded"]


def test_a_group_interrupted_mid_way_resumes_only_its_unfinished_pages(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(3)
    kept = PageResult(page=1, status="succeeded", text="kept")
    harness.store.put("jobs/x/p1.json", kept.model_dump_json().encode())
    with transaction(harness.sessions) as session:  # page 1 finished before the crash
        page = session.scalars(select(Page).where(Page.job_id == job_id, Page.page_no == 1)).one()
        page.status, page.result_key = "succeeded", "jobs/x/p1.json"
    engine = ScriptedEngine()
    harness.drain(engine)
    assert engine.calls == [([], [2, 3])]
    assert [r.text for r in load_page_results(harness.store, harness.job(job_id))] == [
        "kept",
        "text of page 2",
        "text of page 3",
    ]


def _expire_leases(harness) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from uocr_core.db import utcnow

    with transaction(harness.sessions) as session:
        for group in session.scalars(select(PageGroup).where(PageGroup.status == "running")):
            group.lease_expires_at = utcnow() - timedelta(seconds=1)


@pytest.mark.parametrize("harness", [{"parallel_page_groups": True}], indirect=True)
def test_parallel_groups_finishing_in_any_order_complete_the_job_once(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    queued = list(harness.dispatcher.groups)
    assert [g for _, g in queued] == [0, 1, 2]  # every group queued at submit
    harness.dispatcher.groups.clear()
    engine = ScriptedEngine()
    pipeline = harness.pipeline(engine)
    for message in reversed(queued):  # as several workers might finish them
        assert pipeline.run(*message) == "ran"
        assert not harness.dispatcher.groups  # nothing queued twice
    assert [c[1] for c in engine.calls] == [[6, 7], [4, 5], [1, 2, 3]]
    job = harness.job(job_id)
    assert (job.status, job.pages_done) == ("succeeded", 7)
    texts = [r.text for r in load_page_results(harness.store, job)]
    assert texts == [f"text of page {n}" for n in range(1, 8)]  # in page order
    assert pipeline.run(*queued[0]) == "finished"  # redelivered after the end: a no-op
    assert harness.job(job_id).finished_at == job.finished_at


class HookedEngine(ScriptedEngine):
    """Runs ``hooks[n]`` while it decodes its n-th group: a client acting mid-group."""

    def __init__(self, hooks: dict[int, Callable[[], None]]) -> None:
        super().__init__()
        self.hooks = hooks

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        if hook := self.hooks.get(len(self.calls)):
            hook()
        return super().run_group(group)


def _cancel(harness, job_id: str) -> Callable[[], None]:  # type: ignore[no-untyped-def]
    return lambda: cancel_job(
        harness.sessions,
        harness.dispatcher,
        harness.settings,
        tenant_id=harness.tenant_id,
        job_id=job_id,
        actor=audit.OPERATOR,
    )


def _document_statuses(harness, job_id: str) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """Each page's status as every object a client reads shows it."""

    def read(fmt: str) -> bytes:
        return harness.store.get(object_keys.result_key(job_id, fmt))

    progress = json.loads(harness.store.get(object_keys.progress_key(job_id)))
    return {
        "status": [p.status for p in harness.job(job_id).pages],
        "progress.json": [p["status"] for p in progress["pages"]],
        "result.json": [p["status"] for p in json.loads(read("json"))["pages"]],
        "pages.jsonl": [json.loads(line)["status"] for line in read("jsonl").splitlines()],
    }


def test_a_job_canceled_mid_document_lists_every_unstarted_page_as_canceled(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    engine = HookedEngine({0: _cancel(harness, job_id)})
    harness.drain(engine)
    assert [c[1] for c in engine.calls] == [[1, 2, 3]]  # stopped after its group
    job = harness.job(job_id)
    assert (job.status, job.pages_done) == ("canceled", 3)
    expected = ["succeeded"] * 3 + ["canceled"] * 4
    assert _document_statuses(harness, job_id) == dict.fromkeys(
        ("status", "progress.json", "result.json", "pages.jsonl"), expected
    )
    assert [g.status for g in job.groups] == ["done", "canceled", "canceled"]


def test_regression_a_cancel_during_the_last_group_leaves_a_succeeded_job(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    harness.drain(HookedEngine({2: _cancel(harness, job_id)}))
    job = harness.job(job_id)
    assert (job.status, job.pages_done, job.cancel_requested) == ("succeeded", 7, True)
    assert json.loads(harness.store.get(object_keys.result_key(job_id, "json")))["status"] == (
        "succeeded"
    )


@pytest.mark.parametrize("harness", [{"parallel_page_groups": True}], indirect=True)
def test_a_cancel_waits_for_the_group_still_running_elsewhere(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    first, second, third = list(harness.dispatcher.groups)
    harness.dispatcher.groups.clear()
    other_worker = harness.pipeline(ScriptedEngine())
    seen: list[str] = []

    def cancel_then_another_worker_takes_group_1() -> None:
        _cancel(harness, job_id)()
        seen.append(other_worker.run(*second))
        seen.append(harness.job(job_id).status)

    pipeline = harness.pipeline(HookedEngine({0: cancel_then_another_worker_takes_group_1}))
    assert pipeline.run(*first) == "ran"
    assert seen == ["canceled", "running"]  # not finished while group 0 still ran
    job = harness.job(job_id)
    assert job.status == "canceled"
    assert [p.status for p in job.pages] == ["succeeded"] * 3 + ["canceled"] * 4
    assert pipeline.run(*third) == "finished"


def test_a_job_deleted_while_its_group_runs_leaves_nothing_in_storage(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)

    def delete() -> None:
        harness.delete(job_id)

    engine = HookedEngine({0: delete})
    harness.drain(engine)
    assert len(engine.calls) == 1
    assert harness.store.keys_under(object_keys.job_prefix(job_id)) == []
    job = harness.job(job_id)
    assert job.status == "canceled" and job.deleted_by == "t" and job.deleted_at is not None


def test_a_stale_group_of_a_job_that_ended_is_canceled_not_run_again(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(4)

    def end_the_job_meanwhile() -> None:  # as a worker of an older release could leave it
        with transaction(harness.sessions) as session:
            job = session.get(Job, job_id)
            assert job is not None
            job.status = "canceled"
        _expire_leases(harness)
        assert recover_stale_groups(harness.sessions, harness.dispatcher) == []

    harness.drain(HookedEngine({0: end_the_job_meanwhile}))
    job = harness.job(job_id)
    assert [p.status for p in job.pages[:3]] == ["canceled"] * 3  # group 0's pages
    assert job.groups[0].status == "canceled"
    assert harness.dispatcher.groups == deque()  # nothing queued again
