"""A job past retention, through the API on the real S3 server: its objects are gone, its record
says when, and its results answer 410 with the reason."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi.testclient import TestClient

from ocr_api.main import create_app
from ocr_worker.upkeep.retention import purge_expired_results
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf
from uocr_core import object_keys
from uocr_core.db import utcnow


def test_results_past_retention_answer_410_and_the_job_says_when(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls, result_retention_days=1) as idle:
        tenant = idle.new_tenant()
        pdf = scanned_pdf(sample_pages(1, lines=1))
        with TestClient(create_app(idle.settings)) as client:
            client.headers["Authorization"] = f"Bearer {tenant.api_key}"
            job_id = client.post("/v1/jobs", files={"file": ("a.pdf", pdf)}).json()["id"]
            job = client.post(f"/v1/jobs/{job_id}/cancel").json()  # queued: canceled at once
            assert job["status"] == "canceled"
            expires = datetime.fromisoformat(job["results_expire_at"])
            assert expires - datetime.fromisoformat(job["finished_at"]) == timedelta(days=1)
            assert idle.store.keys_under(object_keys.job_prefix(job_id))  # the upload

            purged = purge_expired_results(
                idle.sessions, idle.store, retention_days=1, now=utcnow() + timedelta(days=2)
            )
            assert purged == [job_id]
            assert idle.store.keys_under(object_keys.job_prefix(job_id)) == []

            for path in (f"/v1/jobs/{job_id}/result", f"/v1/jobs/{job_id}/pages/1"):
                gone = client.get(path)
                assert gone.status_code == 410, gone.text
                assert "deleted on" in gone.json()["detail"]
                assert "result_retention_days" in gone.json()["detail"]
            job = client.get(f"/v1/jobs/{job_id}").json()
            assert job["results_deleted_at"] and job["results_expire_at"] is None
            listed = client.get("/v1/jobs").json()["jobs"]
            assert [j["id"] for j in listed] == [job_id]  # the record stays
