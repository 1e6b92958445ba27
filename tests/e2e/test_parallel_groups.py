"""On the CPU engine a document's page groups are queued together, so two workers OCR one long
document at once; it still comes back whole, in page order, each page once, and the workers
take a document's row locks in one order (job, then group), so they never deadlock, and hold the
job's row only for bookkeeping, never while the result is assembled."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.base import PageGroupInput
from ocr_worker.pipeline import PageGroupPipeline
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.factories import sample_pages, scanned_pdf
from tests.worker.conftest import ScriptedEngine
from uocr_core import audit, object_keys
from uocr_core.contracts import PageResult
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.models import Job, PageGroup
from uocr_core.storage import S3ObjectStore


def test_two_workers_share_one_documents_page_groups(service: Service) -> None:
    second = service.start_worker("ocr2@e2e")
    try:
        tenant = service.stack.new_tenant()
        with service.client(tenant) as client:
            job_id = submit(client, scanned_pdf(sample_pages(5, lines=4))).json()["id"]
            job, _ = wait_for(client, job_id)
        assert job["status"] == "succeeded", job
        assert [p["page"] for p in job["pages"]] == [1, 2, 3, 4, 5]
        assert all(p["attempts"] == 1 for p in job["pages"])
        with service.stack.sessions() as session:
            groups = session.scalars(
                select(PageGroup).where(PageGroup.job_id == job_id).order_by(PageGroup.group_index)
            ).all()
        first, last = groups
        assert first.started_at and last.started_at and first.finished_at and last.finished_at
        # Both groups were being OCRed at the same moment: one worker each.
        assert last.started_at < first.finished_at and first.started_at < last.finished_at
    finally:
        second.stop()


class _HeldEngine(ScriptedEngine):
    """Decodes only once the test lets it, so the test can act while a group is mid-way."""

    def __init__(self) -> None:
        super().__init__()
        self.decoding, self.release = threading.Event(), threading.Event()

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        self.decoding.set()
        self.release.wait(30)
        return super().run_group(group)


def _group_lockable(session: Session, job_id: str, group_index: int) -> bool:
    """Whether this session can lock the group's row right now (NOWAIT: no waiting)."""
    try:
        session.execute(
            text(
                "SELECT 1 FROM page_groups WHERE job_id = :job AND group_index = :index "
                "FOR UPDATE NOWAIT"
            ),
            {"job": job_id, "index": group_index},
        )
        return True
    except Exception:  # psycopg's LockNotAvailable, wrapped by SQLAlchemy
        return False


def _queued_job(idle: Stack, *, pages: int) -> str:
    """A job submitted to a deployment no worker reads: the test runs its groups itself."""
    return submit_job(
        sessions=idle.sessions,
        store=idle.store,
        dispatcher=InlineDispatcher(),
        settings=idle.settings,
        tenant_id=idle.new_tenant().tenant_id,
        files=[UploadedFile("d.pdf", scanned_pdf(sample_pages(pages, lines=1)))],
        options=JobOptions(),
        actor=audit.OPERATOR,
    ).job.id


def _job_lockable(session: Session, job_id: str) -> bool:
    try:
        session.execute(
            text("SELECT 1 FROM jobs WHERE id = :job FOR UPDATE NOWAIT"), {"job": job_id}
        )
        return True
    except Exception:
        return False
    finally:
        session.rollback()


class _ProbingStore(S3ObjectStore):
    """Notes, as the searchable PDF is written, whether anyone else could lock the job now."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(stack.settings.s3)
        self.probe = stack.sessions()
        self.job_lockable_while_assembling: list[bool] = []

    def put_file(
        self, key: str, path: Path, content_type: str = "application/octet-stream"
    ) -> None:
        if key.endswith("/result.pdf"):
            job_id = key.split("/")[1]
            self.job_lockable_while_assembling.append(_job_lockable(self.probe, job_id))
        super().put_file(key, path, content_type)


def test_the_result_is_assembled_without_holding_the_job(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    # A 300-page searchable PDF takes seconds to build; a cancel (or another worker) that
    # needs the job's row must not wait for it.
    with deployment_without_workers(stack, service_urls) as idle:
        job_id = _queued_job(idle, pages=2)
        store = _ProbingStore(idle)
        pipeline = PageGroupPipeline(
            sessions=idle.sessions,
            store=store,
            engine=ScriptedEngine(),
            dispatcher=InlineDispatcher(),
            settings=idle.settings,
            worker_id="w1",
        )
        try:
            assert pipeline.run(job_id, 0) == "ran"
        finally:
            store.probe.close()
        assert store.job_lockable_while_assembling == [True]
        with idle.sessions() as session:
            job = session.get(Job, job_id)
            assert job is not None and job.status == "succeeded"
        document = store.get(object_keys.result_key(job_id, "json"))
        assert b'"status": "succeeded"' in document  # written before the job was marked


def test_a_worker_never_holds_a_group_lock_while_waiting_for_its_job(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    # Another worker advancing the job holds the job row and then wants a group row. If this
    # worker took the group first and then waited for the job, the two would deadlock.
    with deployment_without_workers(stack, service_urls) as idle:
        job_id = _queued_job(idle, pages=5)
        engine = _HeldEngine()
        pipeline = PageGroupPipeline(
            sessions=idle.sessions,
            store=idle.store,
            engine=engine,
            dispatcher=InlineDispatcher(),
            settings=idle.settings,
            worker_id="w1",
        )
        outcome: list[str] = []
        worker = threading.Thread(target=lambda: outcome.append(pipeline.run(job_id, 1)))
        other = idle.sessions()
        try:
            other.get(Job, job_id, with_for_update=True)  # the other worker holds the job
            worker.start()  # this one's claim must wait for the job, holding nothing
            time.sleep(0.5)
            assert _group_lockable(other, job_id, 1)
            other.rollback()
            assert engine.decoding.wait(30)  # claimed; now mid-decode
            other.get(Job, job_id, with_for_update=True)
            engine.release.set()  # it finishes decoding and goes to record its pages
            time.sleep(0.5)
            assert _group_lockable(other, job_id, 1)  # it waits for the job, holding nothing
            other.rollback()
        finally:
            engine.release.set()
            other.close()
            worker.join(30)
        assert outcome == ["ran"]
