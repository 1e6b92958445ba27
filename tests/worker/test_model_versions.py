"""A job keeps the model version it was given at submit: every dispatch (the next group, the
reconciler's) goes to that version's queues, a worker of another version sends it back, and the
pages say which version and engine produced them (milliseconds per test, on SQLite)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import update
from structlog.testing import capture_logs

from ocr_api.version_metrics import PAGE_FLAGS
from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.unlimited_ocr.output.page_guard import BUDGET_FLAG, LOOP_FLAG
from ocr_worker.pipeline import PageGroupPipeline
from ocr_worker.upkeep.reconciler import Reconciler
from tests.worker.conftest import ScriptedEngine, _pdf
from uocr_core import audit, object_keys
from uocr_core.batches.service import create_batch
from uocr_core.db import transaction, utcnow
from uocr_core.jobs.admission_service import admit_waiting
from uocr_core.models import Job, PageGroup
from uocr_core.schemas.batches import BatchCreate, BatchDocument
from uocr_core.settings import ModelsSettings


@dataclass
class VersionedDispatcher(InlineDispatcher):
    """Runs in-process like the embedded one, and remembers which version each went to."""

    sent: list[tuple[str, int, str]] = field(default_factory=list)

    def enqueue_group(self, **kw: object) -> str | None:  # type: ignore[override]
        self.sent.append((str(kw["job_id"]), int(kw["group_index"]), str(kw["model_version"])))  # type: ignore[call-overload]
        return super().enqueue_group(**kw)  # type: ignore[arg-type]


def _on_version(harness, job_id: str, version: str) -> None:  # type: ignore[no-untyped-def]
    with transaction(harness.sessions) as session:
        session.execute(update(Job).where(Job.id == job_id).values(model_version=version))


def _pipeline(harness, dispatcher, version: str) -> PageGroupPipeline:  # type: ignore[no-untyped-def]
    return PageGroupPipeline(
        sessions=harness.sessions,
        store=harness.store,
        engine=ScriptedEngine(),
        dispatcher=dispatcher,
        settings=harness.settings,
        worker_id=f"worker-{version}",
        model_version=version,
    )


def test_a_worker_of_another_version_sends_the_group_back_and_its_own_records_the_pages(
    harness,  # type: ignore[no-untyped-def]
) -> None:
    job_id = harness.submit(5)
    _on_version(harness, job_id, "v2")
    dispatcher = VersionedDispatcher()
    assert _pipeline(harness, dispatcher, "v1").run(job_id, 0) == "other_version"
    assert dispatcher.sent == [(job_id, 0, "v2")]
    assert all(p.status == "pending" for p in harness.job(job_id).pages)
    v2 = _pipeline(harness, dispatcher, "v2")
    while dispatcher.groups:
        v2.run(*dispatcher.groups.popleft())
    job = harness.job(job_id)
    assert job.status == "succeeded"
    assert {(p.model_version, p.engine) for p in job.pages} == {("v2", "scripted")}
    assert {version for _, _, version in dispatcher.sent} == {"v2"}  # its next groups too


def test_the_reconciler_dispatches_a_lost_group_to_the_jobs_version_even_once_removed(
    harness,  # type: ignore[no-untyped-def]
) -> None:
    job_id = harness.submit(5)
    _on_version(harness, job_id, "v1")
    harness.dispatcher.groups.clear()  # the message was lost (Redis restarted)
    past = utcnow() - timedelta(seconds=600)
    with transaction(harness.sessions) as session:
        session.execute(update(Job).where(Job.id == job_id).values(created_at=past))
        session.execute(
            update(PageGroup).where(PageGroup.job_id == job_id).values(enqueued_at=past)
        )
    dispatcher = VersionedDispatcher()
    reconciler = Reconciler(
        harness.sessions,
        dispatcher,
        _NothingWaiting(),
        redispatch_after_seconds=60,
        parallel_groups=False,
        known_versions=frozenset({"v2", "v3"}),  # v1 was removed from the settings
    )
    with capture_logs() as logs:
        assert reconciler.run() == [f"{job_id}:0"]
    assert dispatcher.sent == [(job_id, 0, "v1")]  # still v1's: not lost, not moved
    (unknown,) = [e for e in logs if e["event"] == "job.model_version_unknown"]
    assert unknown["model_version"] == "v1" and unknown["unfinished_jobs"] == 1
    assert unknown["log_level"] == "error"


class _NothingWaiting:
    def task_ids(self) -> set[str]:
        return set()


def test_the_apis_per_version_flags_are_the_gpu_engines_flags() -> None:
    assert PAGE_FLAGS == (BUDGET_FLAG, LOOP_FLAG)


def test_a_canary_tenants_batch_documents_are_admitted_to_the_canary(harness) -> None:  # type: ignore[no-untyped-def]
    settings = harness.settings.model_copy(
        update={
            "models": ModelsSettings(
                versions={"v1": {}, "v2": {}}, serve="v1", canary="v2", canary_tenants=("t",)
            )
        }
    )
    key = object_keys.inbox_prefix(harness.tenant_id) + "a.pdf"
    harness.store.put(key, _pdf(4), "application/pdf")
    create_batch(
        sessions=harness.sessions,
        store=harness.store,
        settings=settings,
        tenant_id=harness.tenant_id,
        body=BatchCreate(documents=[BatchDocument(object_key=key)]),
        idempotency_key=None,
        actor=audit.OPERATOR,
    )
    dispatcher = VersionedDispatcher()
    admitted = admit_waiting(
        sessions=harness.sessions, store=harness.store, dispatcher=dispatcher, settings=settings
    )
    assert admitted == 1 and [v for _, _, v in dispatcher.sent] == ["v2"]
    v2 = _pipeline(harness, dispatcher, "v2")
    while dispatcher.groups:
        v2.run(*dispatcher.groups.popleft())
    (job_id,) = {job for job, _, _ in dispatcher.sent}
    job = harness.job(job_id)
    assert (job.status, job.model_version) == ("succeeded", "v2")
    assert {p.model_version for p in job.pages} == {"v2"}
