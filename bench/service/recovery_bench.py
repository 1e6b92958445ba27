"""Time from a fault to the job's completion, beside the same document's undisturbed time.

Production lease, grace, reconcile interval and visibility timeout (the settings' defaults);
its own Redis and Postgres (killed and restarted here), the shared S3 server, the real API,
an OCR worker and a control worker with beat. Faults, each injected once the job is running:

- ``redis_restart``: Redis killed (no persistence: every queued message lost), back after 5 s;
- ``postgres_outage``: Postgres stopped (immediate) for 15 s;
- ``dead_before_claim``: a consumer takes the group's message and is SIGKILLed before claiming;
- ``worker_killed``: the OCR worker SIGKILLed mid-group and started again at once.

    eval "$(bash .ci/services env)" && .venv/bin/python -m bench.service.recovery_bench --pages 10
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import redis
from celery import Celery

from bench import harness
from tests.e2e.own_services import OwnPostgres, OwnRedis
from tests.e2e.processes import Process, api_server, celery_worker, free_port, wait_http, wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.celery_app import make_celery
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.settings import Settings, load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import create_key

OCR_WORKER = "ocr-bench@recovery"
FAULTS = ("redis_restart", "postgres_outage", "dead_before_claim", "worker_killed")
_TAKE_AND_HOLD = """
import sys, time
from kombu import Connection, Queue
with Connection(sys.argv[1]) as conn:
    conn.SimpleQueue(Queue("ocr.backlog", routing_key="ocr.backlog")).get(timeout=60)
    print("taken", flush=True)
    time.sleep(3600)
"""


@dataclass
class Deployment:
    redis: OwnRedis
    postgres: OwnPostgres
    env: dict[str, str]
    logs: Path
    api_url: str
    api_key: str
    settings: Settings
    ocr_worker: Process | None = None

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.Client(base_url=self.api_url, timeout=30, headers=headers)

    def start_ocr_worker(self) -> None:
        worker = celery_worker(
            self.env, self.logs, name=OCR_WORKER, queues="ocr.interactive,ocr.backlog", beat=False
        ).start()
        app = make_celery(self.settings)
        wait_until(lambda: _answers(app), 90, what="the OCR worker to answer a ping")
        self.ocr_worker = worker


def _answers(app: Celery) -> bool:
    try:
        return bool(app.control.ping(destination=[OCR_WORKER], timeout=0.5))
    except (redis.RedisError, OSError):  # a pooled connection from before a Redis restart
        return False


def deploy(logs: Path) -> tuple[Deployment, list[Process]]:
    redis, postgres = OwnRedis().start(), OwnPostgres().init()
    env = {
        "UOCR_DATABASE__URL": postgres.url,
        "UOCR_REDIS__URL": redis.url,
        "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
        "UOCR_S3__BUCKET": f"uocr-recovery-{uuid.uuid4().hex[:8]}",
        "UOCR_LOG_LEVEL": "info",
    }
    os.environ.update(env)
    settings = load_settings()
    S3ObjectStore(settings.s3).ensure_bucket()
    with transaction(make_session_factory(make_engine(settings.database))) as session:
        key = create_key(session, tenant_name="bench").api_key
    port = free_port()
    control_env = {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"}
    control = celery_worker(control_env, logs, name="control@recovery", queues="control", beat=True)
    processes = [control.start(), api_server(env, logs, port).start()]
    deployment = Deployment(redis, postgres, env, logs, f"http://127.0.0.1:{port}", key, settings)
    deployment.start_ocr_worker()
    wait_http(f"{deployment.api_url}/healthz")
    return deployment, processes


def _status(client: httpx.Client, job_id: str) -> dict:  # type: ignore[type-arg]
    while True:
        try:
            response = client.get(f"/v1/jobs/{job_id}")
            if response.status_code == 200:
                return response.json()  # type: ignore[no-any-return]
        except httpx.TransportError:
            pass
        time.sleep(0.5)  # 503 while a dependency is down


def run_job(dep: Deployment, pdf: bytes, fault: Callable[[Deployment], None] | None) -> dict:  # type: ignore[type-arg]
    """Submit, inject the fault once a page group runs, wait for the end; times in seconds."""
    with dep.client() as client:
        submitted = time.monotonic()
        job_id = client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}).json()["id"]
        fault_at = None
        if fault is not None:
            wait_until(lambda: _status(client, job_id)["status"] == "running", 300, what="run")
            fault_at = time.monotonic()
            fault(dep)
        return _wait_for_end(client, job_id, submitted, fault_at)


def _wait_for_end(client, job_id: str, submitted: float, fault_at: float | None) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """Poll until the job ends; its times from submit and from the fault, and whether every
    page succeeded exactly once."""
    while (job := _status(client, job_id))["status"] not in ("succeeded", "failed"):
        time.sleep(0.5)
    done = time.monotonic()
    pages = [p["page"] for p in job["pages"] if p["status"] == "succeeded"]
    return {
        "total_s": round(done - submitted, 1),
        "fault_to_done_s": round(done - fault_at, 1) if fault_at else None,
        "status": job["status"],
        "pages_once": pages == list(range(1, len(job["pages"]) + 1)),
    }


def redis_restart(dep: Deployment) -> None:
    dep.redis.kill()
    time.sleep(5)
    dep.redis.start()


def postgres_outage(dep: Deployment) -> None:
    dep.postgres.stop()
    time.sleep(15)
    dep.postgres.start()


def worker_killed(dep: Deployment) -> None:
    assert dep.ocr_worker is not None
    dep.ocr_worker.signal(signal.SIGKILL)
    dep.ocr_worker.popen.wait(10)  # type: ignore[union-attr]
    dep.start_ocr_worker()


def dead_before_claim(dep: Deployment, pdf: bytes) -> dict:  # type: ignore[type-arg]
    """The OCR worker is stopped, so the message waits; a consumer takes it and dies."""
    assert dep.ocr_worker is not None
    dep.ocr_worker.stop()
    with dep.client() as client:
        submitted = time.monotonic()
        job_id = client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}).json()["id"]
        taker = subprocess.Popen(
            [sys.executable, "-c", _TAKE_AND_HOLD, dep.redis.url], stdout=subprocess.PIPE
        )
        assert taker.stdout is not None and taker.stdout.readline().startswith(b"taken")
        taker.send_signal(signal.SIGKILL)
        fault_at = time.monotonic()
        dep.start_ocr_worker()
        return _wait_for_end(client, job_id, submitted, fault_at)


def main() -> None:
    parser = harness.parser(__doc__, pages=10, help={"pages": "pages of the document"})
    parser.add_argument(
        "--faults", default="redis_restart,postgres_outage,dead_before_claim,worker_killed"
    )
    args = parser.parse_args()
    pdf = scanned_pdf(sample_pages(args.pages, lines=3))
    logs = Path(tempfile.mkdtemp(prefix="recovery-bench-"))
    dep, processes = deploy(logs)
    w = dep.settings.worker
    results: dict[str, object] = {
        "settings": {
            "lease_seconds": w.lease_seconds,
            "redispatch_after_seconds": w.redispatch_after_seconds,
            "reconcile_interval_seconds": w.reconcile_interval_seconds,
            "visibility_timeout_s": dep.settings.max_group_time_limit * 2 + 60,
            "page_group_size": dep.settings.page_group_size,
            "pages": args.pages,
        }
    }
    faults: dict[str, Callable[[Deployment], None]] = {
        "redis_restart": redis_restart,
        "postgres_outage": postgres_outage,
        "worker_killed": worker_killed,
    }
    try:
        results["undisturbed"] = run_job(dep, pdf, None)
        print(json.dumps({"undisturbed": results["undisturbed"]}), flush=True)
        for name in args.faults.split(","):
            if name == "dead_before_claim":
                results[name] = dead_before_claim(dep, pdf)
            else:
                results[name] = run_job(dep, pdf, faults[name])
            print(json.dumps({name: results[name]}), flush=True)
    finally:
        for process in [dep.ocr_worker, *processes]:
            if process is not None:
                process.stop()
        dep.redis.kill()
        dep.postgres.destroy()
    print(json.dumps(results, indent=2))
    harness.write(results, args, harness.card())
    print(f"logs in {logs}")


if __name__ == "__main__":
    main()
