"""A CPU worker's child whose memory passes `worker.max_memory_per_child_mb` after a task is
replaced by a fresh process (so a slow native leak cannot creep for hours), and the document
it was working through still comes back whole, each page once."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.helpers import wait_for
from tests.e2e.processes import celery_worker, wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES


def test_a_child_over_its_memory_limit_is_replaced_and_nothing_is_lost(
    stack: Stack, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    with deployment_without_workers(stack, service_urls) as own:
        # 1 MB: every child is over it after any task, so each page group gets a fresh child.
        env = {**own.env, "UOCR_WORKER__MAX_MEMORY_PER_CHILD_MB": "1"}
        name = "recycled@e2e"
        worker = celery_worker(
            env, tmp_path, name=name, queues=",".join(OCR_QUEUES), beat=False
        ).start()
        try:
            app = make_celery(own.settings)
            wait_until(lambda: app.control.ping(destination=[name], timeout=0.5), 60, what=name)
            tenant = own.new_tenant()
            with TestClient(create_app(own.settings)) as client:
                client.headers["Authorization"] = f"Bearer {tenant.api_key}"
                pdf = scanned_pdf(sample_pages(5, lines=2))
                job_id = client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}).json()["id"]
                job, _ = wait_for(client, job_id, timeout=180)
            assert job["status"] == "succeeded", job
            assert job["groups_total"] == 2
            assert [p["page"] for p in job["pages"]] == [1, 2, 3, 4, 5]
            assert all(p["status"] == "succeeded" and p["attempts"] == 1 for p in job["pages"])
            # Each page group ran in a child of its own: the first was replaced after its task.
            events = [
                json.loads(line)
                for line in worker.log_tail(500_000).splitlines()
                if line.startswith("{")
            ]
            group_pids = [e["process"] for e in events if e["event"] == "page_group.finished"]
            assert len(group_pids) == 2 and group_pids[0] != group_pids[1], group_pids
        finally:
            worker.stop()
