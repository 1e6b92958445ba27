"""Alerts proven end to end: real Prometheus scrapes the live API and an OCR worker's own
metrics, evaluates ops/prometheus-alerts.yml, and real Alertmanager routes by ops/alertmanager.yml
to a local receiver. Real conditions are driven (a stopped worker with queued work, a burst of
damaged pages) and each alert must arrive where the runbook says: critical at the pager,
warning at the ticket queue, and not at the other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.helpers import submit
from tests.e2e.monitoring import Monitoring, start_monitoring
from tests.e2e.processes import (
    Process,
    WebhookReceiver,
    api_server,
    celery_worker,
    free_port,
    wait_http,
    wait_until,
)
from tests.factories import sample_pages, scanned_pdf
from tests.ops.test_alert_rules import RULES
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES

WORKER = "ocr@alerts"


@dataclass
class Monitored:
    stack: Stack
    logs: Path
    api_url: str
    worker_port: int
    monitoring: Monitoring
    receiver: WebhookReceiver
    worker: Process | None = None

    def client(self) -> httpx.Client:
        key = self.stack.new_tenant().api_key
        return httpx.Client(
            base_url=self.api_url, timeout=30, headers={"Authorization": f"Bearer {key}"}
        )

    def start_worker(self) -> None:
        """An OCR worker serving its metrics, once it answers a ping and Prometheus scraped it."""
        env = {**self.stack.env, "UOCR_WORKER__METRICS_PORT": str(self.worker_port)}
        self.worker = celery_worker(
            env, self.logs, name=WORKER, queues=",".join(OCR_QUEUES), beat=False
        ).start()
        app = make_celery(self.stack.settings)
        wait_until(lambda: app.control.ping(destination=[WORKER], timeout=0.5), 60, what="worker")
        self.monitoring.wait_for_value('up{job="uocr-worker"} == 1', timeout=30)

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def alerts_at(self, receiver: str, alertname: str) -> list[dict]:  # type: ignore[type-arg]
        return [
            alert
            for hook in self.receiver.for_path(f"/{receiver}")
            for alert in hook.event["alerts"]
            if alert["labels"]["alertname"] == alertname and alert["status"] == "firing"
        ]


@pytest.fixture(scope="module")
def monitored(
    stack: Stack, service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Monitored]:
    logs = tmp_path_factory.mktemp("alerts-logs")
    receiver = WebhookReceiver()
    server = receiver.start()
    with deployment_without_workers(stack, service_urls) as own:
        api_port, worker_port = free_port(), free_port()
        api = api_server(own.env, logs, api_port).start()
        targets = {"uocr-api": api_port, "uocr-worker": worker_port}
        try:
            monitoring = start_monitoring(
                logs,
                receiver_url=receiver.url(""),
                targets={job: f"127.0.0.1:{port}" for job, port in targets.items()},
            )
        except TimeoutError:
            api.stop()
            server.shutdown()
            raise
        monitored = Monitored(
            own, logs, f"http://127.0.0.1:{api_port}", worker_port, monitoring, receiver
        )
        try:
            wait_http(f"{monitored.api_url}/healthz")
            monitoring.wait_for_value('up{job="uocr-api"} == 1')
            yield monitored
        finally:
            monitored.stop_worker()
            monitoring.stop()
            api.stop()
            server.shutdown()
            print(f"alert test logs in {logs}")


def test_a_stopped_worker_with_queued_work_pages_someone(monitored: Monitored) -> None:
    monitored.start_worker()
    monitored.stop_worker()
    with monitored.client() as client:
        assert submit(client, scanned_pdf(sample_pages(1, lines=2))).status_code == 202

    alerts = wait_until(
        lambda: monitored.alerts_at("pager", "UocrWorkStalled"), 60, what="the page"
    )
    assert alerts[0]["labels"]["severity"] == "critical"
    assert "no worker is taking work" in alerts[0]["annotations"]["summary"]
    assert monitored.alerts_at("ticket", "UocrWorkStalled") == []


def test_a_burst_of_failing_pages_opens_a_ticket(monitored: Monitored) -> None:
    if monitored.worker is None:
        monitored.start_worker()
    whole = scanned_pdf(sample_pages(8, lines=1))
    truncated = whole[: int(len(whole) * 0.3)]  # most pages' images are cut off
    with monitored.client() as client:
        for _ in range(2):
            assert submit(client, truncated, "cut.pdf").status_code == 202

    alerts = wait_until(
        lambda: monitored.alerts_at("ticket", "UocrPageErrorRate"), 90, what="the ticket"
    )
    assert alerts[0]["labels"]["severity"] == "warning"
    assert monitored.alerts_at("pager", "UocrPageErrorRate") == []
    # The worker's own counter saw the same failures; a CPU worker reports no GPU series.
    failed = 'sum(uocr_worker_pages_total{job="uocr-worker", outcome="failed"})'
    assert monitored.monitoring.wait_for_value(f"{failed} >= 5") >= 5
    assert monitored.monitoring.query("uocr_gpu_memory_used_bytes") == []
    exported = monitored.monitoring.query('{__name__=~"uocr_worker_.+"}')
    alerted = set(re.findall(r"\buocr_worker_[a-z_]+", RULES.read_text()))
    assert alerted <= {series["metric"]["__name__"] for series in exported}  # all can fire
    # CPU pre-processing: the task process's one render process, and the time it spent.
    worker = '{job="uocr-worker"}'
    assert monitored.monitoring.wait_for_value(f"sum(uocr_worker_render_processes{worker})") == 1
    assert monitored.monitoring.wait_for_value(f"uocr_worker_render_seconds_total{worker} > 0")
