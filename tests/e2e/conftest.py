"""The running service: API, an OCR worker, a control worker (webhooks, recovery), Flower."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.accuracy.corpus import CI_DOCUMENTS
from bench.accuracy.runner import ScannedDocument, scan
from tests.conftest import Stack
from tests.e2e.helpers import wait_for
from tests.e2e.processes import (
    FLOWER_PASSWORD,
    FLOWER_USER,
    Process,
    WebhookReceiver,
    api_server,
    celery_worker,
    flower,
    free_port,
    wait_http,
    wait_until,
)
from tests.factories import require_fetched
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES
from uocr_core.tenants import CreatedKey

OCR_WORKER_NAME = "ocr@e2e"


@dataclass
class Service:
    stack: Stack
    logs: Path
    api_url: str
    flower_url: str
    ocr_worker: Process | None
    receiver: WebhookReceiver

    def client(self, tenant: CreatedKey) -> httpx.Client:
        return httpx.Client(
            base_url=self.api_url,
            timeout=30,
            headers={"Authorization": f"Bearer {tenant.api_key}"},
        )

    def start_ocr_worker(self) -> None:
        self.ocr_worker = self.start_worker(OCR_WORKER_NAME)

    def start_worker(self, name: str, queues: str = ",".join(OCR_QUEUES)) -> Process:
        """An OCR worker process (on every OCR queue by default), once it answers a ping."""
        worker = celery_worker(
            self.stack.env, self.logs, name=name, queues=queues, beat=False
        ).start()
        app = make_celery(self.stack.settings)
        wait_until(
            lambda: app.control.ping(destination=[name], timeout=0.5),
            60,
            what=f"the worker {name} to answer a ping",
        )
        return worker


@pytest.fixture(scope="session")
def service(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    logs = tmp_path_factory.mktemp("service-logs")
    api_port, flower_port = free_port(), free_port()
    env = {**stack.env, "UOCR_PUBLIC_BASE_URL": f"http://127.0.0.1:{api_port}"}
    receiver = WebhookReceiver()
    server = receiver.start()
    flower_process = flower(env, logs, flower_port).start()
    control = celery_worker(
        {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"},
        logs,
        name="control@e2e",
        queues="control",
        beat=True,
    ).start()
    api = api_server(env, logs, api_port).start()
    stack.env = env
    service = Service(
        stack,
        logs,
        f"http://127.0.0.1:{api_port}",
        f"http://{FLOWER_USER}:{FLOWER_PASSWORD}@127.0.0.1:{flower_port}",  # httpx sends them
        ocr_worker=None,
        receiver=receiver,
    )
    try:
        service.start_ocr_worker()
        wait_http(f"{service.api_url}/healthz")
        wait_http(f"{service.flower_url}/healthcheck")
        yield service
    finally:
        for process in (service.ocr_worker, control, api, flower_process):
            if process is not None:
                process.stop()
        server.shutdown()
        print(f"service logs in {logs}")


@dataclass(frozen=True)
class ReadScan:
    """A real scanned document of the accuracy set, read by the service's real worker."""

    tenant: CreatedKey
    job_id: str
    scanned: ScannedDocument


@pytest.fixture(scope="session")
def real_scan_read(service: Service) -> ReadScan:
    """r-admin's three real pages (English prose, headings, shell commands), scanned as
    scanners degrade them and read once for the tests that look at what came out (search,
    chunk sizes): the CPU engine takes about a minute on them."""
    source = CI_DOCUMENTS[0]
    require_fetched(source)
    scanned = scan(source)
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        accepted = client.post("/v1/jobs", files={"file": ("r-admin.pdf", scanned.pdf)})
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        job, _ = wait_for(client, job_id)
    assert job["status"] == "succeeded", job
    return ReadScan(tenant, job_id, scanned)
