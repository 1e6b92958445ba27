"""What an operator starts: every process logs JSON lines, the API runs several processes, and
Flower asks for credentials (its pages, its API and /metrics) and listens on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from tests.conftest import Stack
from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import (
    UOCR_ARGV,
    Process,
    api_server,
    celery_worker,
    free_port,
    wait_http,
    wait_until,
)
from tests.factories import sample_pages, scanned_pdf
from uocr_core.celery_app import make_celery


def _not_json(log: Path) -> list[str]:
    """The lines of ``log`` that are not one JSON object each."""
    bad = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            if not isinstance(json.loads(line), dict):
                bad.append(line)
        except ValueError:
            bad.append(line)
    return bad


def _records(log: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_every_process_of_the_service_logs_json_lines(service: Service) -> None:
    """API (uvicorn and its access log), OCR and control workers (Celery, beat), Flower."""
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        accepted = submit(client, scanned_pdf(sample_pages(2, seed=5), seed=5))
        assert accepted.status_code == 202, accepted.text
        job, _ = wait_for(client, accepted.json()["id"])
        assert job["status"] == "succeeded", job
        assert client.get("/v1/jobs/not-a-job").status_code == 404
    httpx.get(f"{service.flower_url}/api/workers").raise_for_status()
    logs = sorted(service.logs.glob("*.log"))
    assert {log.name for log in logs} >= {"api.log", "flower.log", "worker-ocr.log"}
    for log in logs:
        assert _not_json(log) == [], log.name
    access = [r for r in _records(service.logs / "api.log") if r["logger"] == "uvicorn.access"]
    assert any(r["status"] == 404 and r["method"] == "GET" for r in access), access[-3:]
    worker = _records(service.logs / "worker-ocr.log")
    assert any(r["logger"].startswith("celery") for r in worker)


def test_the_api_runs_several_processes_logging_json(stack: Stack, tmp_path: Path) -> None:
    port = free_port()
    api = api_server(stack.env, tmp_path, port, workers=2).start()
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
        for _ in range(6):
            httpx.get(f"http://127.0.0.1:{port}/healthz").raise_for_status()
    finally:
        api.stop()
    assert _not_json(tmp_path / "api.log") == []
    records = _records(tmp_path / "api.log")
    started = {r["process"] for r in records if r["event"].startswith("Started server process")}
    assert len(started) == 2, records
    assert any(r["logger"] == "uvicorn.access" and r["status"] == 200 for r in records)


def test_a_worker_logs_json_lines_from_start_to_shutdown(stack: Stack, tmp_path: Path) -> None:
    """Its start (a warning when run as root), its render processes, its warm shutdown."""
    name = "json-logs@e2e"
    worker = celery_worker(stack.env, tmp_path, name=name, queues="json-logs", beat=False)
    worker.start()
    app = make_celery(stack.settings)
    try:
        wait_until(lambda: app.control.ping(destination=[name], timeout=0.5), 60, what=name)
        log = tmp_path / "worker-json-logs.log"
        wait_until(lambda: "worker.ready" in log.read_text(), 60, what="the engine loaded")
    finally:
        worker.stop()
    records = _records(tmp_path / "worker-json-logs.log") if not _not_json(log) else []
    assert _not_json(log) == []
    assert any(r["event"] == "worker: Warm shutdown (MainProcess)" for r in records)


def test_the_scheduler_alone_logs_json_lines(stack: Stack, tmp_path: Path) -> None:
    argv = [*UOCR_ARGV, "beat", "--schedule", str(tmp_path / "schedule")]
    beat = Process(argv, stack.env, tmp_path / "beat.log").start()
    try:
        wait_until(
            lambda: "Sending due task" in (tmp_path / "beat.log").read_text(), 60, what="a tick"
        )
    finally:
        beat.stop()
    assert _not_json(tmp_path / "beat.log") == []


@pytest.mark.parametrize("path", ["/", "/workers", "/api/workers", "/metrics"])
def test_flower_asks_for_credentials(service: Service, path: str) -> None:
    with_credentials = f"{service.flower_url}{path}"
    parts = urlsplit(with_credentials)
    bare = parts._replace(netloc=parts.netloc.split("@", 1)[1]).geturl()
    refused = httpx.get(bare)
    assert refused.status_code == 401
    if not path.startswith("/api/"):  # Flower's JSON API answers a bare 401
        assert refused.headers["WWW-Authenticate"].startswith("Basic")
    wrong = httpx.get(bare, auth=("e2e", "not-the-password"))
    assert wrong.status_code == 401
    assert httpx.get(with_credentials).status_code == 200


def test_flower_health_stays_open_for_the_orchestrator(service: Service) -> None:
    parts = urlsplit(service.flower_url)
    bare = parts._replace(netloc=parts.netloc.split("@", 1)[1]).geturl()
    assert httpx.get(f"{bare}/healthcheck").text == "OK"


def test_flower_listens_on_loopback_by_default(service: Service) -> None:
    port = urlsplit(service.flower_url).port
    listening = [
        c.laddr.ip
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    assert listening == ["127.0.0.1"]
