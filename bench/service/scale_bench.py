"""The control plane at scale: what the API, Postgres, Redis, S3, beat (feeder, reconciler) and
the workers' bookkeeping cost a page, on a database that already holds N page rows of finished
jobs, for each N given, side by side; and which statements grow with N, with their plans.

For each size: a fresh database on the bench's own Postgres (started with pg_stat_statements and
auto_explain), filled by COPY (tests/scale_fill.py), then a batch of 20-page documents
(uocr_client's archive submit) beside a few interactive jobs of a second tenant, on a real API,
a simulated-engine OCR worker (one prefork child a card) and a control worker with beat. CPU
from each process tree's own counters (psutil) and Redis's INFO; rows and WAL from
pg_stat_database and pg_stat_wal; S3 requests from the CI moto server's request log. Plans:
after the measured run, auto_explain logs every statement's plan while a small batch runs and
the hourly sweeps are called once.
Needs ``bash .ci/services start`` (Redis, S3) and root (initdb as postgres). Run:

    eval "$(bash .ci/services env)" && .venv/bin/python -m bench.service.scale_bench \\
        --rows 10000 1000000
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from bench import harness
from bench.service.scale_cluster import (
    MOTO_LOG,
    Cluster,
    cpu_by_kind,
    db_counters,
    redis_cpu,
    s3_requests,
)
from bench.service.scale_report import normalise, pct, plan_nodes, report
from ocr_worker.upkeep.orphans import sweep_orphan_objects
from ocr_worker.upkeep.retention import purge_expired_results
from tests import scale_fill
from tests.conftest import TEST_SETTINGS_ENV, create_database, drop_database
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
from uocr_client.archive import submit_archive
from uocr_client.client import TERMINAL, UocrClient
from uocr_core.contracts import OCR_QUEUES
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.settings import load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import create_key


class Poller(threading.Thread):
    """A client following its work while the batch runs: the tenant's job list, then the
    newest job's status, every 200 ms; and Redis's memory."""

    def __init__(self, client: httpx.Client, broker: redis.Redis) -> None:
        super().__init__(daemon=True)
        self.client, self.broker = client, broker
        self.list_ms: list[float] = []
        self.status_ms: list[float] = []
        self.redis_peak = self.redis_misses = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            with harness.Stopwatch() as listed:
                jobs = self.client.get("/v1/jobs", params={"limit": 20}).json()["jobs"]
            self.list_ms.append(listed.ms)
            if jobs:
                with harness.Stopwatch() as status:
                    self.client.get(f"/v1/jobs/{jobs[0]['id']}").raise_for_status()
                self.status_ms.append(status.ms)
            self._sample_redis()
            time.sleep(0.2)

    def _sample_redis(self) -> None:
        """Redis's memory, when it answers: a busy Redis that times out INFO once must not end
        the polling (it did, on 2 cores at 10^7 rows, and the status samples with it)."""
        try:
            used = int(self.broker.info("memory")["used_memory"])
        except redis.RedisError:
            self.redis_misses += 1
            return
        self.redis_peak = max(self.redis_peak, used)


# -- one size ------------------------------------------------------------------------------------


def empty_bucket(store: S3ObjectStore, bucket: str) -> None:
    """Every object of ``bucket`` deleted, then the bucket: a thousand keys a request."""
    pages = store.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    for page in pages:
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            store.client.delete_objects(Bucket=bucket, Delete={"Objects": keys})
    store.client.delete_bucket(Bucket=bucket)


def run_size(rows: int, args: Any, cluster: Cluster, files: dict[str, Path]) -> dict[str, Any]:
    tag = f"scale{rows}_{uuid.uuid4().hex[:6]}"
    bucket = "uocr-" + tag.replace("_", "-")
    url = create_database(cluster.admin_url, tag)
    env = {
        **TEST_SETTINGS_ENV,
        # The service's own page groups and limits, not the tests' small ones.
        "UOCR_PAGE_GROUP_SIZE": "8",
        "UOCR_MAX_PAGES_PER_REQUEST": "300",
        "UOCR_LONG_DOCUMENT_PAGES": "50",
        "UOCR_MAX_UPLOAD_BYTES": str(50 * 1024 * 1024),
        "UOCR_WORKER__LEASE_SECONDS": "120",
        "UOCR_WORKER__RECONCILE_INTERVAL_SECONDS": str(args.reconcile_seconds),
        "UOCR_ENGINE": "simulated",
        "UOCR_DATABASE__URL": url,
        "UOCR_REDIS__URL": os.environ["UOCR_TEST_REDIS_URL"] + "/13",
        "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
        "UOCR_S3__BUCKET": bucket,
    }
    os.environ.update(env)
    settings = load_settings()
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    broker = redis.Redis.from_url(settings.redis.url)
    broker.flushdb()
    sessions = make_session_factory(make_engine(settings.database))
    with transaction(sessions) as session:
        keys = [create_key(session, tenant_name=n) for n in ("archive", "app", *OTHER_TENANTS)]
    with harness.Stopwatch() as filling:
        filled = scale_fill.fill(url, rows, [k.tenant_id for k in keys])
    print(f"rows={rows}: filled in {filling.seconds:.1f} s: {filled}", flush=True)
    db = f"uocr_{tag}"
    fill_bytes = cluster.sql("SELECT pg_database_size(%s)", db)[0][0]
    logs = Path(tempfile.mkdtemp(prefix=f"uocr-scale-{rows}-"))
    port = free_port()
    ocr = celery_worker(env, logs, name="ocr@scale", queues=",".join(OCR_QUEUES), beat=False)
    ocr.argv[ocr.argv.index("-c") + 1] = str(args.cards)  # one prefork child a simulated card
    control = {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"}
    processes: dict[str, Process] = {
        "api": api_server(env, logs, port, workers=2).start(),
        "ocr worker": ocr.start(),
        "control worker": celery_worker(
            control, logs, name="control@scale", queues="control", beat=True
        ).start(),
    }
    base = f"http://127.0.0.1:{port}"
    receiver = WebhookReceiver()
    receiver.start()
    try:
        wait_http(f"{base}/healthz", 60)
        with (
            UocrClient(base, keys[0].api_key, timeout=120) as team,
            UocrClient(base, keys[1].api_key, timeout=120) as app,
        ):
            interactive(app, files["interactive"], 1, receiver, 0)  # warm every process
            measured = workload(
                args, cluster, db, bucket, processes, broker, team, app, files, receiver, store
            )
            plans = capture_plans(cluster, team, app, files, sessions, store, settings)
        print(f"rows={rows}: workload done; logs in {logs}", flush=True)
    finally:
        for process in processes.values():
            process.stop()
        if not args.keep:
            drop_database(cluster.admin_url, tag)
            # The S3 server (moto) holds every object in memory: a size's ~11 GB (40,000 pages
            # of every format) left in it took the next size's run into the OOM killer.
            empty_bucket(store, bucket)
    return {
        "rows": rows,
        "filled": filled,
        "fill_seconds": filling.seconds,
        "fill_db_bytes": fill_bytes,
        **measured,
        "plans": plans,
    }


OTHER_TENANTS = ("records", "legal", "claims", "hr", "library", "finance")


def workload(
    args: Any,
    cluster: Cluster,
    db: str,
    bucket: str,
    processes: dict[str, Process],
    broker: redis.Redis,
    team: UocrClient,
    app: UocrClient,
    files: dict[str, Path],
    receiver: WebhookReceiver,
    store: S3ObjectStore,
) -> dict[str, Any]:
    """The measured run: counters before, the batch and the interactive jobs, counters after."""
    roots = {kind: p.popen.pid for kind, p in processes.items() if p.popen}
    roots["postgres"] = cluster.postmaster
    time.sleep(11)  # idle backends flush their statistics every 10 s: start from a flushed state
    cluster.sql("SELECT pg_stat_statements_reset()")
    broker.config_resetstat()
    before = (cpu_by_kind(roots, cluster.port), db_counters(cluster, db), redis_cpu(broker))
    moto = psutil.Process(int((MOTO_LOG.parent / "moto.pid").read_text()))
    moto_before, log_offset = _cpu(moto), MOTO_LOG.stat().st_size
    me_before = _cpu(psutil.Process())
    poller = Poller(team.http, broker)
    poller.start()
    side = threading.Thread(
        target=lambda: side_results.extend(
            interactive(app, files["interactive"], args.interactive, receiver, 4)
        )
    )
    side_results: list[float] = []
    side.start()
    names = [(files["batch"], f"box/doc-{i:04d}.pdf") for i in range(args.documents)]
    with harness.Stopwatch() as done:
        with harness.Stopwatch() as accepted:
            batch = submit_archive(team, names, batch_name=db, options={}).batch
        wait_until(
            lambda: team.batch(batch.id).status in TERMINAL,
            args.timeout,
            interval=1,
            what="the batch",
        )
    side.join()
    poller.stop.set()
    poller.join()
    cpu_after, me_after = cpu_by_kind(roots, cluster.port), _cpu(psutil.Process())
    redis_after, moto_after = redis_cpu(broker), _cpu(moto)
    time.sleep(11)  # the workers' last statistics flushed
    counters = db_counters(cluster, db)
    final = team.batch(batch.id)
    pages = final.pages.done + final.pages.failed + args.interactive * 3
    cpu: dict[str, float] = {k: cpu_after[k] - before[0][k] for k in cpu_after}
    cpu |= {"redis": redis_after - before[2], "s3 (moto)": moto_after - moto_before}
    requests = s3_requests(log_offset, bucket)
    stored = sum(
        o["Size"]
        for p in store.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in p.get("Contents", [])
    )
    statements = cluster.sql(
        "SELECT query, calls, total_exec_time, mean_exec_time, rows, shared_blks_hit "
        "+ shared_blks_read FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
        "WHERE d.datname = %s ORDER BY total_exec_time DESC",
        db,
    )
    return {
        "pages": pages,
        "batch_status": final.status,
        "cpu_ms_per_page": {k: v * 1000 / pages for k, v in cpu.items()},
        "bench_client_cpu_ms_per_page": (me_after - me_before) * 1000 / pages,
        "db_per_page": {k: (counters[k] - before[1][k]) / pages for k in counters},
        "redis_used_memory_peak": int(broker.info("memory")["used_memory_peak"]),
        "redis_sampled_peak": poller.redis_peak,
        "s3_requests_per_page": {k: v / pages for k, v in requests.items()},
        "s3_bytes_stored_per_page": stored / pages,
        "accept_seconds": accepted.seconds,
        "submit_to_done_seconds": done.seconds,
        "interactive_completion_s": side_results,
        "status_ms": {
            "n": len(poller.status_ms),
            "p50": pct(poller.status_ms, 50),
            "p95": pct(poller.status_ms, 95),
        },
        "list_ms": {
            "n": len(poller.list_ms),
            "p50": pct(poller.list_ms, 50),
            "p95": pct(poller.list_ms, 95),
        },
        "statements": [
            dict(zip(("query", "calls", "total_ms", "mean_ms", "rows", "blocks"), s, strict=True))
            for s in statements
        ],
    }


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def interactive(
    app: UocrClient, pdf: Path, jobs: int, receiver: WebhookReceiver, spacing: float
) -> list[float]:
    """Interactive jobs (with a webhook), one every ``spacing`` s; completion seconds of each."""
    took = []
    for _ in range(jobs):
        with harness.Stopwatch() as watch:
            job = app.submit_file(pdf, priority="interactive", webhook_url=receiver.url("/hook"))
            wait_until(
                lambda job=job: app.job(job.id).status in TERMINAL,
                600,
                interval=0.2,
                what="an interactive job",
            )
        took.append(watch.seconds)
        time.sleep(max(0.0, spacing - watch.seconds))
    return took


def capture_plans(
    cluster: Cluster,
    team: UocrClient,
    app: UocrClient,
    files: dict[str, Path],
    sessions: Any,
    store: S3ObjectStore,
    settings: Any,
) -> dict[str, Any]:
    """Every statement's plan, once: a small batch, an interactive job, a list and a status,
    a reconciler tick while jobs run, and the hourly sweeps called here (timed)."""
    offset = cluster.log_end()
    cluster.explain_all(True)
    try:
        names = [(files["batch"], f"plans/doc-{i}.pdf") for i in range(3)]
        batch = submit_archive(
            team, names, batch_name=f"plans-{uuid.uuid4().hex[:6]}", options={}
        ).batch
        interactive(app, files["interactive"], 1, WebhookReceiver(), 0)
        team.http.get("/v1/jobs", params={"limit": 20})
        team.http.get(f"/v1/batches/{batch.id}/jobs")
        wait_until(lambda: team.batch(batch.id).status in TERMINAL, 300, what="the plans batch")
        with harness.Stopwatch() as purge:
            purge_expired_results(sessions, store, retention_days=settings.result_retention_days)
        with harness.Stopwatch() as orphans:
            sweep_orphan_objects(sessions, store, grace_hours=settings.orphan_grace_hours)
    finally:
        cluster.explain_all(False)
    plans: dict[str, dict[str, Any]] = {}
    for line in cluster.log_since(offset):
        message = json.loads(line).get("message", "")
        if "plan:\n" not in message:
            continue
        plan = json.loads(message.split("plan:\n", 1)[1])
        key = normalise(plan["Query Text"])
        nodes = list(plan_nodes(plan["Plan"]))
        scans = [n.strip() for n in nodes if n.strip().startswith("Seq Scan on ")]
        big = [n for n in scans if n.split()[3] in scale_fill.BIG_TABLES]
        entry = {"query": plan["Query Text"], "nodes": nodes, "seq_scans": big}
        if key not in plans or entry["seq_scans"]:
            plans[key] = entry
    return {"purge_expired_ms": purge.ms, "sweep_orphans_ms": orphans.ms, "by_query": plans}


def main() -> None:
    parser = harness.parser(__doc__, documents=150, help={"documents": "20-page documents"})
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=[10_000, 1_000_000],
        help="page rows of finished jobs in the database, one run each",
    )
    parser.add_argument("--interactive", type=int, default=5, help="interactive jobs (3 pages)")
    parser.add_argument("--cards", type=int, default=4, help="simulated cards (prefork children)")
    parser.add_argument("--reconcile-seconds", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds the batch may take")
    parser.add_argument("--keep", action="store_true", help="keep each size's database and bucket")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="uocr-scale-docs-"))
    files = {"batch": folder / "batch.pdf", "interactive": folder / "app.pdf"}
    files["batch"].write_bytes(scanned_pdf(sample_pages(20, lines=2, seed=3), seed=3, dpi=72))
    files["interactive"].write_bytes(scanned_pdf(sample_pages(3, lines=2, seed=4), seed=4, dpi=72))
    cluster = Cluster().start()
    try:
        results = []
        for rows in args.rows:  # each size kept as it ends: a later one may not fit the time
            results.append(run_size(rows, args, cluster, files))
            (folder / f"size-{rows}.json").write_text(json.dumps(results[-1], default=str))
            print(f"rows={rows}: figures in {folder}/size-{rows}.json", flush=True)
    finally:
        cluster.stop()
    summary = report(results)
    figures = {
        "documents": args.documents,
        "interactive": args.interactive,
        "cards": args.cards,
        "cores": os.cpu_count(),
        **summary,
        "sizes": results,
    }
    harness.write(figures, args, harness.card())


if __name__ == "__main__":
    main()
