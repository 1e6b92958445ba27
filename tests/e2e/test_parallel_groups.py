"""On the CPU engine a document's page groups are queued together, so two workers OCR one long
document at once; it still comes back whole, in page order, each page once."""

from __future__ import annotations

from sqlalchemy import select

from ocr_api.core.celery_app import make_celery
from ocr_api.core.models import PageGroup
from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import celery_worker, wait_until
from tests.factories import sample_pages, scanned_pdf

SECOND_WORKER = "ocr2@e2e"


def test_two_workers_share_one_documents_page_groups(service: Service) -> None:
    second = celery_worker(
        service.stack.env,
        service.logs,
        name=SECOND_WORKER,
        queues="ocr.interactive,ocr.backlog",
        beat=False,
    ).start()
    try:
        app = make_celery(service.stack.settings)
        wait_until(
            lambda: app.control.ping(destination=[SECOND_WORKER], timeout=0.5),
            60,
            what="the second worker to answer",
        )
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
