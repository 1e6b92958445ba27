"""The page-group pipeline harness: SQLite and a folder store (milliseconds per test), and a
scripted engine so each test controls exactly what decoding returns. The real engines run in
test_rapidocr.py and the end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.base import OcrEngine, PageGroupInput
from ocr_worker.pipeline import PageGroupPipeline
from uocr_core import audit
from uocr_core.contracts import PageResult
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.jobs.service import JobOptions, UploadedFile, delete_job, submit_job
from uocr_core.migrate import upgrade
from uocr_core.models import Job
from uocr_core.settings import load_settings
from uocr_core.storage import LocalObjectStore
from uocr_core.tenants import create_key


class ScriptedEngine(OcrEngine):
    name = "scripted"
    uses_context_pages = True

    def __init__(self, crash_groups: int = 0, failing_pages: tuple[int, ...] = ()) -> None:
        self.crash_groups = crash_groups  # raise on this many calls first
        self.failing_pages = failing_pages
        self.calls: list[tuple[list[int], list[int]]] = []  # (context pages, output pages)

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        self.calls.append(([p.page_no for p in group.context], [p.page_no for p in group.pages]))
        if self.crash_groups:
            self.crash_groups -= 1
            raise RuntimeError("device lost")
        return [
            PageResult(page=p.page_no, status="failed", error="unreadable")
            if p.page_no in self.failing_pages
            else PageResult(page=p.page_no, status="succeeded", text=f"text of page {p.page_no}")
            for p in group.pages
        ]


def _pdf(pages: int) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page(width=200, height=200).insert_text((20, 40), f"page {n + 1}")
    return doc.tobytes()


@pytest.fixture
def harness(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'state.db'}"
    upgrade(url)
    worker_overrides = getattr(request, "param", {})  # parametrize(..., indirect=True)
    settings = load_settings(
        page_group_size=3,
        page_group_overlap=1,
        # Whatever the stack's environment says (20 for the end-to-end tests): a pipeline test
        # submits what it reads, up to a 300-page book (test_long_document.py).
        max_pages_per_request=1000,
        database={"url": url},
        s3={"local_root": tmp_path / "objects"},
        worker={
            "lease_seconds": 5,
            "max_group_attempts": 2,
            "render_dpi": 50,
            "parallel_page_groups": False,  # in order, as the GPU engine runs them
            "render_processes": 0,  # in the test's process: milliseconds, not a spawn
            **worker_overrides,
        },
    )
    sessions = make_session_factory(make_engine(settings.database))
    with transaction(sessions) as session:
        tenant_id = create_key(session, tenant_name="t").tenant_id

    class Harness:
        store = LocalObjectStore(tmp_path / "objects")
        dispatcher = InlineDispatcher()

        def submit(self, pages: int) -> str:
            return submit_job(
                sessions=sessions,
                store=self.store,
                dispatcher=self.dispatcher,
                settings=settings,
                tenant_id=tenant_id,
                files=[UploadedFile("d.pdf", _pdf(pages))],
                options=JobOptions(),
                actor=audit.OPERATOR,
            ).job.id

        def delete(self, job_id: str) -> None:
            delete_job(
                sessions=sessions,
                store=self.store,
                dispatcher=self.dispatcher,
                settings=settings,
                tenant_id=tenant_id,
                job_id=job_id,
                deleted_by="t",
                actor=audit.OPERATOR,
            )

        def pipeline(self, engine: OcrEngine) -> PageGroupPipeline:
            return PageGroupPipeline(
                sessions=sessions,
                store=self.store,
                engine=engine,
                dispatcher=self.dispatcher,
                settings=settings,
                worker_id="test",
            )

        def drain(self, engine: OcrEngine) -> None:
            pipeline = self.pipeline(engine)
            while self.dispatcher.groups:
                pipeline.run(*self.dispatcher.groups.popleft())

        def job(self, job_id: str) -> Job:
            with sessions() as session:
                job = session.get(Job, job_id)
                assert job is not None
                job.pages, job.groups  # noqa: B018 - load while the session is open
                return job

    Harness.sessions = sessions  # type: ignore[attr-defined]
    Harness.settings = settings  # type: ignore[attr-defined]
    Harness.tenant_id = tenant_id  # type: ignore[attr-defined]
    return Harness()
