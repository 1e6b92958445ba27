"""queue_max_size fails fast for interactive submits, per tenant: 429 with Retry-After and no
job recorded. Backlog submits are never refused for room: they wait, durable, in Postgres, and
another tenant's backlog never fills anyone's interactive queue."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf
from uocr_core.models import Job


def test_interactive_room_is_per_tenant_and_backlogs_wait(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls, queue_max_size=1) as idle:
        archive, app = idle.new_tenant(), idle.new_tenant()
        pdf = scanned_pdf(sample_pages(1, lines=1))
        with TestClient(create_app(idle.settings)) as client:

            def submit(tenant_key: str, name: str, priority: str) -> Any:
                return client.post(
                    "/v1/jobs",
                    files={"file": (name, pdf)},
                    data={"priority": priority},
                    headers={"Authorization": f"Bearer {tenant_key}"},
                )

            backlog = [submit(archive.api_key, f"b{i}.pdf", "backlog") for i in range(3)]
            first = submit(app.api_key, "a.pdf", "interactive")
            second = submit(app.api_key, "c.pdf", "interactive")
        assert [r.status_code for r in backlog] == [202, 202, 202]
        assert first.status_code == 202  # the archive's backlog took none of its room
        assert second.status_code == 429
        assert int(second.headers["Retry-After"]) > 0
        assert "queue is full" in second.json()["detail"]
        with idle.sessions() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == 4
