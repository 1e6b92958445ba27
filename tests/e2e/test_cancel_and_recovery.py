"""Cancellation, and a worker killed mid-document: nothing lost, nothing done twice."""

from __future__ import annotations

import json
import signal

import httpx
from sqlalchemy import select

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.models import Page, PageGroup


def _status(client: httpx.Client, job_id: str) -> dict:  # type: ignore[type-arg]
    return client.get(f"/v1/jobs/{job_id}").raise_for_status().json()


def test_cancel_stops_a_running_job_after_its_group_and_a_queued_one_never_starts(
    service: Service,
) -> None:
    tenant = service.stack.new_tenant()
    hook = service.receiver.url("/hooks/cancel")
    with service.client(tenant) as client:
        running = submit(client, scanned_pdf(sample_pages(6, lines=4)), webhook_url=hook).json()
        queued = submit(client, scanned_pdf(sample_pages(2, lines=2))).json()
        assert client.post(f"/v1/jobs/{queued['id']}/cancel").status_code == 202
        assert _status(client, queued["id"])["status"] == "canceled"

        wait_until(
            lambda: _status(client, running["id"])["status"] == "running",
            60,
            interval=0.05,
            what="the first job to start",
        )
        canceled = client.post(f"/v1/jobs/{running['id']}/cancel")
        assert canceled.status_code == 202 and canceled.json()["cancel_requested"] is True
        again = client.post(f"/v1/jobs/{running['id']}/cancel")  # asked twice: the same answer
        assert again.status_code == 202 and again.json()["status"] == "running"
        job, _ = wait_for(client, running["id"])

        assert job["status"] == "canceled"
        assert job["pages_done"] in (3, 5) and job["pages_done"] < job["pages_total"]
        statuses = [p["status"] for p in job["pages"]]
        done = job["pages_done"]
        # Regression: the pages never run stayed "pending" for ever in the status.
        assert statuses == ["succeeded"] * done + ["canceled"] * (6 - done)
        assert "Page 1" in client.get(f"/v1/jobs/{running['id']}/pages/1").json()["text"]
        never_run = client.get(f"/v1/jobs/{running['id']}/pages/6")
        assert never_run.status_code == 409 and "canceled" in never_run.json()["detail"]
        assert "retry" not in never_run.json()["detail"]
        partial = client.get(f"/v1/jobs/{running['id']}/result").json()
        assert partial["status"] == "canceled"
        assert [p["status"] for p in partial["pages"]] == statuses
        finished = client.post(f"/v1/jobs/{running['id']}/cancel")
        assert finished.status_code == 409, finished.text
        assert "already finished (canceled)" in finished.json()["detail"]

        never = _status(client, queued["id"])
        assert never["status"] == "canceled" and never["pages_done"] == 0
        assert all(p["started_at"] is None for p in never["pages"])
        assert client.get(f"/v1/jobs/{queued['id']}/result").status_code == 409

    events = wait_until(lambda: service.receiver.for_path("/hooks/cancel"), 30, what="webhook")
    assert events[0].event["type"] == "job.canceled"


def test_a_worker_killed_mid_document_leaves_a_job_that_completes_every_page_once(
    service: Service,
) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, scanned_pdf(sample_pages(7, lines=4))).json()["id"]

        def second_group_running() -> bool:
            pages = _status(client, job_id)["pages"]
            return pages[2]["status"] == "succeeded" and pages[3]["status"] == "running"

        wait_until(second_group_running, 120, interval=0.05, what="the second group to run")
        worker = service.ocr_worker
        assert worker is not None and worker.popen is not None
        worker.signal(signal.SIGKILL)  # the whole worker: parent and pool child
        worker.popen.wait(10)
        service.start_ocr_worker()
        job, _ = wait_for(client, job_id, timeout=180)

        assert job["status"] == "succeeded", job
        assert [p["page"] for p in job["pages"]] == list(range(1, 8))
        assert all(p["status"] == "succeeded" for p in job["pages"])
        link = client.get(f"/v1/jobs/{job_id}/result/link", params={"format": "jsonl"}).json()
        lines = [json.loads(line) for line in httpx.get(link["url"]).text.splitlines()]
        assert [line["page"] for line in lines] == list(range(1, 8))  # each page exactly once

    with service.stack.sessions() as session:
        groups = session.scalars(
            select(PageGroup).where(PageGroup.job_id == job_id).order_by(PageGroup.group_index)
        ).all()
        attempts = {
            p.page_no: p.attempts
            for p in session.scalars(select(Page).where(Page.job_id == job_id))
        }
    assert [g.attempts for g in groups] == [1, 2, 1]  # only the interrupted group ran again
    assert attempts == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 1, 7: 1}
