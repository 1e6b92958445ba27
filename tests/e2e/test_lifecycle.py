"""Answers a client can build on: cancel is its own action (409 once there is nothing to
cancel), DELETE removes the document and every result and leaves a tombstone (410 after), a
cancel too late to stop anything leaves the job succeeded, and URLs are absolute."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi.testclient import TestClient
from sqlalchemy import select

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.conftest import Service
from tests.e2e.helpers import JobsClient, submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core import object_keys
from uocr_core.models import Job, Page


class Answer(Protocol):  # an httpx response, or the TestClient's
    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


def _status(client: JobsClient, job_id: str) -> dict[str, Any]:
    return dict(client.get(f"/v1/jobs/{job_id}").raise_for_status().json())


def _assert_gone(response: Answer, job_id: str, tenant_name: str) -> None:
    assert response.status_code == 410, response.text
    detail = response.json()["detail"]
    assert f"job {job_id} was deleted on " in detail and f"UTC by {tenant_name}" in detail


def test_a_deleted_job_answers_410_everywhere_and_leaves_the_listing(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    pdf = scanned_pdf(sample_pages(2, lines=1))
    with deployment_without_workers(stack, service_urls) as idle:
        tenant = idle.new_tenant()
        with TestClient(create_app(idle.settings)) as client:
            client.headers["Authorization"] = f"Bearer {tenant.api_key}"
            kept = client.post("/v1/jobs", files={"file": ("kept.pdf", pdf)}).json()["id"]
            key = {"Idempotency-Key": "a-1"}
            upload = {"file": ("a.pdf", pdf)}
            job_id = client.post("/v1/jobs", files=upload, headers=key).json()["id"]
            assert idle.store.keys_under(object_keys.job_prefix(job_id))  # the upload

            deleted = client.delete(f"/v1/jobs/{job_id}")
            assert deleted.status_code == 204 and deleted.content == b""
            assert idle.store.keys_under(object_keys.job_prefix(job_id)) == []
            for response in (
                client.get(f"/v1/jobs/{job_id}"),
                client.get(f"/v1/jobs/{job_id}/result"),
                client.get(f"/v1/jobs/{job_id}/result/link"),
                client.get(f"/v1/jobs/{job_id}/pages/1"),
                client.post(f"/v1/jobs/{job_id}/cancel"),
                client.delete(f"/v1/jobs/{job_id}"),  # deleted twice
            ):
                _assert_gone(response, job_id, tenant.tenant_name)
            assert [j["id"] for j in client.get("/v1/jobs").json()["jobs"]] == [kept]
            resubmitted = client.post("/v1/jobs", files=upload, headers=key)
            assert resubmitted.status_code == 409  # the tombstone keeps its key
            assert "deleted on" in resubmitted.json()["detail"]
            assert _status(client, kept)["status"] == "queued"  # the other job is untouched

        with idle.sessions() as session:
            tombstone = session.get(Job, job_id)
            assert tombstone is not None and tombstone.status == "canceled"
            assert tombstone.deleted_by == tenant.tenant_name


def test_cancel_of_a_finished_job_is_a_conflict_and_urls_are_absolute(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    pdf = scanned_pdf(sample_pages(1, lines=1))
    base = "https://ocr.example.org/"
    with deployment_without_workers(stack, service_urls, public_base_url=base) as idle:
        tenant = idle.new_tenant()
        with TestClient(create_app(idle.settings)) as client:
            client.headers["Authorization"] = f"Bearer {tenant.api_key}"
            accepted = client.post("/v1/jobs", files={"file": ("a.pdf", pdf)}).json()
            job_id = accepted["id"]
            assert accepted["status_url"] == f"https://ocr.example.org/v1/jobs/{job_id}"
            first = client.post(f"/v1/jobs/{job_id}/cancel")
            assert first.status_code == 202 and first.json()["status"] == "canceled"
            assert first.json()["result_url"] == f"https://ocr.example.org/v1/jobs/{job_id}/result"
            again = client.post(f"/v1/jobs/{job_id}/cancel")
            assert again.status_code == 409
            assert again.json()["detail"] == (
                f"job {job_id} already finished (canceled); nothing to cancel"
            )
            assert [p["status"] for p in _status(client, job_id)["pages"]] == ["canceled"]


def test_deleting_a_finished_job_removes_its_document_and_every_result(service: Service) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, scanned_pdf(sample_pages(2, lines=2))).json()["id"]
        job, _ = wait_for(client, job_id)
        assert job["status"] == "succeeded"
        assert job["result_url"] == f"{service.api_url}/v1/jobs/{job_id}/result"
        prefix = object_keys.job_prefix(job_id)
        stored = service.stack.store.keys_under(prefix)
        assert object_keys.result_key(job_id, "pdf") in stored  # input, pages, every format
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 204
        assert service.stack.store.keys_under(prefix) == []
        _assert_gone(client.get(f"/v1/jobs/{job_id}"), job_id, tenant.tenant_name)
        _assert_gone(client.delete(f"/v1/jobs/{job_id}"), job_id, tenant.tenant_name)


def test_deleting_a_running_job_stops_its_worker_and_leaves_nothing_stored(
    service: Service,
) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, scanned_pdf(sample_pages(7, lines=4))).json()["id"]
        wait_until(
            lambda: _status(client, job_id)["status"] == "running",
            60,
            interval=0.05,
            what="the job to start",
        )
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 204
        _assert_gone(client.get(f"/v1/jobs/{job_id}"), job_id, tenant.tenant_name)

    def finished() -> Job | None:
        with service.stack.sessions() as session:
            job = session.get(Job, job_id)
            return job if job is not None and job.finished_at is not None else None

    job = wait_until(finished, 120, what="the deleted job's worker to stop")
    assert job.status == "canceled"
    with service.stack.sessions() as session:
        pages = session.scalars(select(Page).where(Page.job_id == job_id)).all()
    assert sum(p.status == "succeeded" for p in pages) < 7  # stopped after its group
    assert service.stack.store.keys_under(object_keys.job_prefix(job_id)) == []


def test_a_cancel_while_the_last_group_runs_leaves_the_job_succeeded(service: Service) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, scanned_pdf(sample_pages(3, lines=6))).json()["id"]  # one group
        wait_until(
            lambda: _status(client, job_id)["status"] == "running",
            60,
            interval=0.02,
            what="the job to start",
        )
        cancel = client.post(f"/v1/jobs/{job_id}/cancel")
        assert cancel.status_code == 202 and cancel.json()["cancel_requested"] is True
        job, _ = wait_for(client, job_id)
        assert job["status"] == "succeeded", job
        assert [p["status"] for p in job["pages"]] == ["succeeded"] * 3
        assert client.get(f"/v1/jobs/{job_id}/result").json()["status"] == "succeeded"
