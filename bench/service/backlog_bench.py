"""An overnight backlog beside an app's interactive work: how fast a 1,000-document batch is
accepted, how much of it Redis holds (the admitted window, not 1,000 messages), and what the
app's interactive submits and jobs cost with and without the backlog running, in one run.

Needs Postgres, Redis and the S3 server (``bash .ci/services start``); starts its own API,
OCR worker and control worker (with beat: the feeder) on a fresh database and bucket. Run:

    eval "$(bash .ci/services env)" && .venv/bin/python -m bench.service.backlog_bench
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import httpx
import redis

from bench import harness
from tests.conftest import TEST_SETTINGS_ENV, create_database, drop_database
from tests.e2e.processes import api_server, celery_worker, free_port, wait_http, wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.contracts import OCR_QUEUES
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.settings import load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import create_key


def interactive_round(
    client: httpx.Client, pdf: bytes, jobs: int
) -> tuple[list[float], list[float], list[float]]:
    """Submit latency (ms), wait for a worker (s: submitted to started) and completion time (s)
    of ``jobs`` interactive jobs, one after another, as an app would send them."""
    submits, waits, completions = [], [], []
    for _ in range(jobs):
        with harness.Stopwatch() as submit:
            response = client.post(
                "/v1/jobs", files={"file": ("app.pdf", pdf)}, data={"priority": "interactive"}
            )
        submits.append(submit.ms)
        started = submit.started
        response.raise_for_status()  # a refusal (429) would fail the bench, as it should
        job_id = response.json()["id"]
        wait_until(
            lambda job_id=job_id: client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded",
            600,
            interval=0.05,
            what="an interactive job",
        )
        completions.append(time.perf_counter() - started)
        job = client.get(f"/v1/jobs/{job_id}").json()
        waits.append(_seconds(job["started_at"]) - _seconds(job["created_at"]))
    return submits, waits, completions


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


class BrokerWatch:
    """The most page-group messages waiting in Redis's OCR queues, sampled every 50 ms."""

    def __init__(self, url: str) -> None:
        self.redis = redis.Redis.from_url(url)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(self.redis.llen(q) for q in OCR_QUEUES))
            time.sleep(0.05)

    def __enter__(self) -> BrokerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) > 1 else values[0]


def main() -> None:
    parser = harness.parser(
        __doc__, documents=1000, help={"documents": "one-page documents in the batch"}
    )
    parser.add_argument("--interactive", type=int, default=10)
    parser.add_argument("--window", type=int, default=16)
    args = parser.parse_args()
    admin = os.environ["UOCR_TEST_DATABASE_URL"]
    tag = "backlog" + uuid.uuid4().hex[:8]
    env = {
        **TEST_SETTINGS_ENV,
        "UOCR_ADMISSION__WINDOW": str(args.window),
        "UOCR_ADMISSION__TENANT_MAX_IN_FLIGHT": str(args.window),
        "UOCR_ADMISSION__INTERVAL_SECONDS": "1",
        "UOCR_DATABASE__URL": create_database(admin, tag),
        "UOCR_REDIS__URL": os.environ["UOCR_TEST_REDIS_URL"] + "/14",
        "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
        "UOCR_S3__BUCKET": tag,
    }
    os.environ.update(env)
    settings = load_settings()
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    redis.Redis.from_url(settings.redis.url).flushdb()
    with transaction(make_session_factory(make_engine(settings.database))) as session:
        archive = create_key(session, tenant_name="archive")
        app = create_key(session, tenant_name="app")
    page = scanned_pdf(sample_pages(1, lines=2, seed=5), seed=5, dpi=100)
    keys = [f"inbox/{archive.tenant_id}/box/{i:05d}.pdf" for i in range(args.documents)]
    for key in keys:  # what an archive team uploads during the day (not timed)
        store.put(key, page, "application/pdf")
    logs = Path(tempfile.mkdtemp(prefix="uocr-backlog-bench-"))
    port = free_port()
    processes = [
        api_server(env, logs, port, workers=2).start(),
        celery_worker(env, logs, name="bench@ocr", queues=",".join(OCR_QUEUES), beat=False).start(),
        celery_worker(
            {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"},
            logs,
            name="bench@control",
            queues="control",
            beat=True,
        ).start(),
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/healthz")
        with (
            httpx.Client(base_url=base, timeout=120, headers=_auth(app.api_key)) as apps,
            httpx.Client(base_url=base, timeout=600, headers=_auth(archive.api_key)) as team,
        ):
            interactive_round(apps, page, 2)  # warm the worker's engine
            quiet = interactive_round(apps, page, args.interactive)
            with BrokerWatch(settings.redis.url) as watch:
                with harness.Stopwatch() as accept:
                    created = team.post(
                        "/v1/batches",
                        json={"name": "box", "documents": [{"object_key": k} for k in keys]},
                    )
                accept_seconds = accept.seconds
                created.raise_for_status()
                batch_id = created.json()["id"]
                wait_until(
                    lambda: team.get(f"/v1/batches/{batch_id}").json()["pages"]["done"] >= 5,
                    300,
                    what="the backlog to be running",
                )
                busy = interactive_round(apps, page, args.interactive)
                batch = team.get(f"/v1/batches/{batch_id}").json()
            team.post(f"/v1/batches/{batch_id}/cancel")
    finally:
        for process in processes:
            process.stop()
        drop_database(admin, tag)
    print(f"documents={args.documents} window={args.window} cores={os.cpu_count()}")
    print(f"batch of {args.documents} accepted in {accept_seconds * 1000:.0f} ms")
    print(f"most page-group messages in Redis while it ran: {watch.peak} (window {args.window})")
    print(
        f"backlog while measured: {batch['documents']['succeeded']} done, "
        f"{batch['documents']['waiting']} waiting in Postgres"
    )
    title = f"interactive (n={args.interactive})"
    print(f"{title:<28}{'no backlog':>12}{'backlog':>12}{'ratio':>8}")
    rows = [
        ("submit p50 (ms)", statistics.median(quiet[0]), statistics.median(busy[0])),
        ("submit p95 (ms)", p95(quiet[0]), p95(busy[0])),
        ("wait for a worker p50 (s)", statistics.median(quiet[1]), statistics.median(busy[1])),
        ("wait for a worker p95 (s)", p95(quiet[1]), p95(busy[1])),
        ("completion p50 (s)", statistics.median(quiet[2]), statistics.median(busy[2])),
        ("completion p95 (s)", p95(quiet[2]), p95(busy[2])),
    ]
    for name, alone, loaded in rows:
        print(f"{name:<28}{alone:>12.2f}{loaded:>12.2f}{loaded / max(alone, 1e-3):>8.2f}")
    figures = {
        "documents": args.documents,
        "window": args.window,
        "accept_ms": accept_seconds * 1000,
        "most_messages_in_redis": watch.peak,
        "interactive": {name: {"no_backlog": a, "backlog": b} for name, a, b in rows},
    }
    harness.write(figures, args, harness.card())


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


if __name__ == "__main__":
    main()
