"""Whole service vs bare RapidOCR on the same pages, and submit latency under 32 clients.

Needs Postgres, Redis and the S3 server (``bash .ci/services start``); starts its own API and
worker processes on a fresh database and bucket. Run:

    eval "$(bash .ci/services env)" && .venv/bin/python -m bench.service.service_bench --pages 12
"""

from __future__ import annotations

import os
import statistics
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench import harness
from ocr_worker.engines.base import PageImage
from ocr_worker.engines.rapidocr import RapidOcrEngine
from ocr_worker.imaging import PageRasterizer
from tests.conftest import TEST_SETTINGS_ENV, create_database, drop_database
from tests.e2e.processes import api_server, celery_worker, free_port, wait_http, wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.settings import load_settings
from uocr_core.storage import LocalObjectStore, S3ObjectStore
from uocr_core.tenants import create_key


def bare_rapidocr(pdf: bytes, pages: int, dpi: int) -> float:
    """Pages per second: render + OCR in one process, no service around it."""
    with tempfile.TemporaryDirectory() as folder:
        store = LocalObjectStore(Path(folder))
        store.put("doc.pdf", pdf)
        rasterizer = PageRasterizer(store, dpi=dpi, max_side=4000)
        engine = RapidOcrEngine(threads=2)
        engine.recognize_page(PageImage(0, rasterizer.render("doc.pdf", 0)))  # warm-up
        with harness.Stopwatch() as watch:
            for index in range(pages):
                engine.recognize_page(PageImage(index + 1, rasterizer.render("doc.pdf", index)))
        return pages / watch.seconds


def service_throughput(client: httpx.Client, pdf: bytes, pages: int) -> float:
    with harness.Stopwatch() as watch:
        job_id = client.post("/v1/jobs", files={"file": ("bench.pdf", pdf)}).json()["id"]
        wait_until(
            lambda: client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded",
            1800,
            interval=0.1,
            what="the bench job",
        )
    return pages / watch.seconds


def submit_latency(client: httpx.Client, pdf: bytes, clients: int, submits: int) -> list[float]:
    def one(_: int) -> float:
        with harness.Stopwatch() as watch:
            response = client.post(
                "/v1/jobs", files={"file": ("small.pdf", pdf)}, data={"priority": "backlog"}
            )
        response.raise_for_status()
        client.delete(f"/v1/jobs/{response.json()['id']}")  # keep the worker free
        return watch.ms

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(submits)))


def main() -> None:
    parser = harness.parser(__doc__, pages=12, help={"pages": "pages of the timed document"})
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--submits", type=int, default=128)
    parser.add_argument("--api-workers", type=int, default=2)
    args = parser.parse_args()
    admin = os.environ["UOCR_TEST_DATABASE_URL"]
    tag = "bench" + uuid.uuid4().hex[:8]
    env = {
        **TEST_SETTINGS_ENV,
        "UOCR_PAGE_GROUP_SIZE": "4",
        "UOCR_QUEUE_MAX_SIZE": "100000",
        "UOCR_MAX_UPLOAD_BYTES": str(200 * 1024 * 1024),
        "UOCR_DATABASE__URL": create_database(admin, tag),
        "UOCR_REDIS__URL": os.environ["UOCR_TEST_REDIS_URL"] + "/15",
        "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
        "UOCR_S3__BUCKET": tag,
    }
    os.environ.update(env)
    settings = load_settings()
    S3ObjectStore(settings.s3).ensure_bucket()
    with transaction(make_session_factory(make_engine(settings.database))) as session:
        key = create_key(session, tenant_name="bench").api_key
    pdf = scanned_pdf(sample_pages(args.pages), seed=3)
    small = scanned_pdf(sample_pages(1, lines=2), seed=4)
    logs = Path(tempfile.mkdtemp(prefix="uocr-bench-"))
    port = free_port()
    processes = [
        api_server(env, logs, port, workers=args.api_workers).start(),
        celery_worker(
            env, logs, name="bench@ocr", queues="ocr.interactive,ocr.backlog", beat=False
        ).start(),
        celery_worker(
            {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"},
            logs,
            name="bench@control",
            queues="control",
            beat=False,
        ).start(),
    ]
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=120,
            headers={"Authorization": f"Bearer {key}"},
            limits=httpx.Limits(max_connections=args.clients),
        ) as client:
            service_throughput(client, small, 1)  # warm the worker's engine
            bare = bare_rapidocr(pdf, args.pages, settings.worker.render_dpi)
            served = service_throughput(client, pdf, args.pages)
            processes[1].stop()  # submit latency measures the API, not the OCR beside it
            alone = submit_latency(client, small, 1, 16)
            latencies = submit_latency(client, small, args.clients, args.submits)
    finally:
        for process in processes:
            process.stop()
        drop_database(admin, tag)
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[18]
    print(f"pages={args.pages} dpi={settings.worker.render_dpi} cores={os.cpu_count()}")
    print(f"{'path':<28}{'pages/s':>10}")
    print(f"{'bare RapidOCR (in-process)':<28}{bare:>10.3f}")
    print(f"{'whole service (HTTP→S3→Celery)':<28}{served:>10.3f}")
    print(f"service / bare ratio: {served / bare:.3f}")
    print(f"API processes: {args.api_workers}")
    print(f"submit latency, 1 client, 16 submits: p50 {statistics.median(alone):.1f} ms")
    print(
        f"submit latency, {args.clients} concurrent clients, {args.submits} submits: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )
    results = {
        "pages": args.pages,
        "dpi": settings.worker.render_dpi,
        "cores": os.cpu_count(),
        "bare_pages_per_s": bare,
        "service_pages_per_s": served,
        "service_over_bare": served / bare,
        "submit_ms_1_client_p50": statistics.median(alone),
        "submit_ms_p50": p50,
        "submit_ms_p95": p95,
        "clients": args.clients,
        "submits": args.submits,
    }
    harness.write(results, args, harness.card())


if __name__ == "__main__":
    main()
