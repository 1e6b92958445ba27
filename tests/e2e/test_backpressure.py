"""More queued jobs than queue_max_size: 429 with Retry-After, and no job recorded."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ocr_api.core.models import Job
from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf


def test_a_full_queue_answers_429_with_retry_after(stack: Stack, service_urls: ServiceUrls) -> None:
    with deployment_without_workers(stack, service_urls, queue_max_size=1) as idle:
        tenant = idle.new_tenant()
        pdf = scanned_pdf(sample_pages(1, lines=1))
        with TestClient(create_app(idle.settings)) as client:
            auth = {"Authorization": f"Bearer {tenant.api_key}"}
            first = client.post("/v1/jobs", files={"file": ("a.pdf", pdf)}, headers=auth)
            second = client.post("/v1/jobs", files={"file": ("b.pdf", pdf)}, headers=auth)
        assert first.status_code == 202
        assert second.status_code == 429
        assert int(second.headers["Retry-After"]) > 0
        assert "queue is full" in second.json()["detail"]
        with idle.sessions() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == 1
