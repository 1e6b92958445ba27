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
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import redis

from bench import harness
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

PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))[-1]
MOTO_LOG = harness.ROOT / ".ci-state" / "moto.log"
SERVER_OPTIONS = [
    "listen_addresses=127.0.0.1",
    "fsync=off",
    "max_connections=200",
    "shared_buffers=1GB",
    "shared_preload_libraries=pg_stat_statements,auto_explain",
    "pg_stat_statements.max=10000",
    "auto_explain.log_format=json",
    # auto_explain.log_min_duration stays -1 (off) until plans are captured; not set here, or
    # this command line would outrank ALTER SYSTEM's setting.
    "logging_collector=on",
    "log_destination=jsonlog",
    "log_directory=log",
    "log_filename=pg",
]
# Set only while plans are captured: every statement's plan with its actual rows.
EXPLAIN_ALL = {"log_min_duration": "0", "log_analyze": "on", "log_timing": "off"}


class Cluster:
    """The bench's own Postgres, in a temporary folder, on a free port."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="uocr-scale-pg-"))
        self.data, self.port = self.dir / "data", free_port()
        self.admin_url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> Cluster:
        shutil.chown(self.dir, "postgres")
        _as_postgres(
            f"{PG_BIN}/initdb -D {self.data} -U postgres --auth=trust -E UTF8 --locale=C.UTF-8"
        )
        options = " ".join(f"-c {o}" for o in SERVER_OPTIONS) + f" -p {self.port} -k {self.dir}"
        _as_postgres(
            f"{PG_BIN}/pg_ctl -D {self.data} -l {self.dir}/server.log -w start "
            f"-o {shlex.quote(options)}"
        )
        self.sql("CREATE EXTENSION pg_stat_statements")
        return self

    def stop(self) -> None:
        _as_postgres(f"{PG_BIN}/pg_ctl -D {self.data} -m fast -w stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, query: str, *params: object, db: str = "postgres") -> list[tuple[Any, ...]]:
        url = f"postgresql://postgres@127.0.0.1:{self.port}/{db}"
        with psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(query, params or None)
            return cursor.fetchall() if cursor.description else []

    def explain_all(self, on: bool) -> None:
        """auto_explain for every session at once: a reload applies a superuser setting."""
        for name, value in EXPLAIN_ALL.items():
            if on:
                self.sql(f"ALTER SYSTEM SET auto_explain.{name} = '{value}'")
            else:
                self.sql(f"ALTER SYSTEM RESET auto_explain.{name}")
        self.sql("SELECT pg_reload_conf()")
        time.sleep(1)

    @property
    def postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def log_end(self) -> int:
        return (self.data / "log" / "pg.json").stat().st_size  # log_filename is fixed: one file

    def log_since(self, offset: int) -> list[str]:
        log = (self.data / "log" / "pg.json").read_bytes()
        return log[offset:].decode(errors="replace").splitlines()


def _as_postgres(command: str) -> None:
    subprocess.run(["su", "postgres", "-c", command], check=True, stdout=subprocess.DEVNULL)


# -- counters ------------------------------------------------------------------------------------


def cpu_by_kind(roots: dict[str, int], pg_port: int) -> Counter[str]:
    """CPU seconds of each process tree, reaped children included (a pool child or a backend
    that exited counts in its parent). The control worker's beat is its child with no Postgres
    connection (the task child holds one: the feeder's pool)."""
    seconds: Counter[str] = Counter()
    for kind, pid in roots.items():
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                t = proc.cpu_times()
                label = kind
                if kind == "ocr worker":  # its main, its prefork children (the cards), renders
                    depth = 0 if proc.pid == pid else 1 if proc.ppid() == pid else 2
                    label = ("ocr worker: main", "ocr worker: cards", "ocr worker: render")[depth]
                if kind == "control worker" and proc.ppid() == pid:
                    talks = any(c.raddr and c.raddr.port == pg_port for c in proc.net_connections())
                    label = kind if talks else "beat"
                seconds[label] += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                continue
    return seconds


def db_counters(cluster: Cluster, db: str) -> dict[str, float]:
    row = cluster.sql(
        "SELECT tup_inserted, tup_updated, tup_deleted, xact_commit, pg_database_size(datname),"
        " (SELECT wal_bytes FROM pg_stat_wal) FROM pg_stat_database WHERE datname = %s",
        db,
    )[0]
    names = ("inserted", "updated", "deleted", "commits", "db_bytes", "wal_bytes")
    return dict(zip(names, map(float, row), strict=True))


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def s3_requests(offset: int, bucket: str) -> Counter[str]:
    """Requests the moto server logged for ``bucket`` since ``offset``, by method."""
    text = MOTO_LOG.read_bytes()[offset:].decode(errors="replace")
    found = re.findall(rf'"(?:\x1b\[[0-9;]*m)?([A-Z]+) /{re.escape(bucket)}[/? ]', text)
    # Others' requests (a test run beside the bench) share moto's CPU: counted, to say so.
    others = len(re.findall(r'"(?:\x1b\[[0-9;]*m)?[A-Z]+ /', text)) - len(found)
    return Counter(found) + Counter({"others'": others})


class Poller(threading.Thread):
    """A client following its work while the batch runs: the tenant's job list, then the
    newest job's status, every 200 ms; and Redis's memory."""

    def __init__(self, client: httpx.Client, broker: redis.Redis) -> None:
        super().__init__(daemon=True)
        self.client, self.broker = client, broker
        self.list_ms: list[float] = []
        self.status_ms: list[float] = []
        self.redis_peak = 0
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
            self.redis_peak = max(self.redis_peak, int(self.broker.info("memory")["used_memory"]))
            time.sleep(0.2)


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100)[q - 1]


# -- one size ------------------------------------------------------------------------------------


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
        nodes = list(_nodes(plan["Plan"]))
        scans = [n.strip() for n in nodes if n.strip().startswith("Seq Scan on ")]
        big = [n for n in scans if n.split()[3] in scale_fill.BIG_TABLES]
        entry = {"query": plan["Query Text"], "nodes": nodes, "seq_scans": big}
        if key not in plans or entry["seq_scans"]:
            plans[key] = entry
    return {"purge_expired_ms": purge.ms, "sweep_orphans_ms": orphans.ms, "by_query": plans}


def _nodes(node: dict[str, Any], depth: int = 0) -> Any:
    what = node["Node Type"] + (f" on {node['Relation Name']}" if "Relation Name" in node else "")
    what += f" using {node['Index Name']}" if "Index Name" in node else ""
    what += f" rows={node.get('Actual Rows', '?')}"
    what += (
        f" removed={node['Rows Removed by Filter']}" if node.get("Rows Removed by Filter") else ""
    )
    yield "  " * depth + what if depth else what
    for child in node.get("Plans", []):
        yield from _nodes(child, depth + 1)


def normalise(query: str) -> str:
    """A statement's shape: parameters and constants as ?, whitespace collapsed."""
    shape = re.sub(r"\$\d+|'[^']*'|\b\d+\b", "?", query)
    return re.sub(r"\s+", " ", shape).strip().lower()


# -- the report ----------------------------------------------------------------------------------


def table(results: list[dict[str, Any]]) -> list[tuple[str, list[float]]]:
    """(name, a value a size) for each line of the side-by-side table."""
    kinds = sorted({k for r in results for k in r["cpu_ms_per_page"]})
    lines = [
        ("fill seconds", [r["fill_seconds"] for r in results]),
        ("db size after fill (MB)", [r["fill_db_bytes"] / 2**20 for r in results]),
        ("pages in the workload", [r["pages"] for r in results]),
        *(
            (f"cpu ms/page: {k}", [r["cpu_ms_per_page"].get(k, 0.0) for r in results])
            for k in kinds
        ),
        ("cpu ms/page: all of the above", [sum(r["cpu_ms_per_page"].values()) for r in results]),
        # Rendering is the OCR host's work (the engine's input), not the control plane's.
        ("cpu ms/page: all but render", [_without_render(r) for r in results]),
        ("cpu ms/page: bench client", [r["bench_client_cpu_ms_per_page"] for r in results]),
        *(
            (f"db {k}/page", [r["db_per_page"][k] for r in results])
            for k in ("inserted", "updated", "deleted", "commits", "wal_bytes", "db_bytes")
        ),
        ("redis used_memory_peak (MB)", [r["redis_used_memory_peak"] / 2**20 for r in results]),
        ("redis sampled peak (MB)", [r["redis_sampled_peak"] / 2**20 for r in results]),
        *(
            (f"s3 {m} requests/page", [r["s3_requests_per_page"].get(m, 0.0) for r in results])
            for m in sorted({m for r in results for m in r["s3_requests_per_page"]})
        ),
        ("s3 bytes stored/page", [r["s3_bytes_stored_per_page"] for r in results]),
        ("batch accepted (s)", [r["accept_seconds"] for r in results]),
        ("submit to done (s)", [r["submit_to_done_seconds"] for r in results]),
        (
            "interactive completion p50 (s)",
            [statistics.median(r["interactive_completion_s"] or [0]) for r in results],
        ),
        ("status p50 (ms)", [r["status_ms"]["p50"] for r in results]),
        ("status p95 (ms)", [r["status_ms"]["p95"] for r in results]),
        ("list p50 (ms)", [r["list_ms"]["p50"] for r in results]),
        ("list p95 (ms)", [r["list_ms"]["p95"] for r in results]),
        ("purge_expired_results once (ms)", [r["plans"]["purge_expired_ms"] for r in results]),
        ("sweep_orphan_objects once (ms)", [r["plans"]["sweep_orphans_ms"] for r in results]),
    ]
    return lines


def _without_render(result: dict[str, Any]) -> float:
    cpu = result["cpu_ms_per_page"]
    return sum(cpu.values()) - cpu.get("ocr worker: render", 0.0)


def _scanned(node: str) -> int:
    """Rows a plan node read: those it returned and those its filter removed."""
    return sum(int(n) for n in re.findall(r"(?:rows|removed)=(\d+)", node))


def growing(results: list[dict[str, Any]], factor: float, floor_ms: float) -> list[dict[str, Any]]:
    """Statements whose mean time at the largest size is ``factor`` times the smallest's (and
    at least ``floor_ms``): their mean at each size, and the largest size's plan."""
    means = [{normalise(s["query"]): s["mean_ms"] for s in r["statements"]} for r in results]
    large = results[-1]
    grown = []
    for s in large["statements"]:
        key = normalise(s["query"])
        first = means[0].get(key)
        if first and s["mean_ms"] >= floor_ms and s["mean_ms"] >= factor * first:
            plan = large["plans"]["by_query"].get(key, {})
            each = [m.get(key, float("nan")) for m in means]
            grown.append(
                {
                    "query": s["query"],
                    "calls": s["calls"],
                    "mean_ms": each,
                    "plan": plan.get("nodes"),
                }
            )
    return sorted(grown, key=lambda g: g["mean_ms"][0] - g["mean_ms"][-1])


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    print(f"{'rows of finished pages':<36}" + "".join(f"{r['rows']:>14,}" for r in results))
    for name, values in table(results):
        print(f"{name:<36}" + "".join(f"{v:>14.3f}" for v in values))
    grown = growing(results, factor=1.5, floor_ms=0.1)
    print(
        f"\nstatements whose mean grew >= 1.5x ({results[0]['rows']:,} -> "
        f"{results[-1]['rows']:,} rows):"
    )
    for g in grown:
        means = " -> ".join(f"{m:.3f}" for m in g["mean_ms"])
        print(f"  {means} ms x{g['calls']}: {g['query'][:300]}")
        for node in g["plan"] or ["(no plan captured)"]:
            print(f"      {node}")
    plans = results[-1]["plans"]["by_query"].items()
    scans = {k: p for k, p in plans if any(_scanned(n) >= 1000 for n in p["seq_scans"])}
    print(f"\nplans with a Seq Scan reading >= 1,000 rows at {results[-1]['rows']:,} rows:")
    for plan in scans.values():
        print(f"  {plan['query'][:300]}")
        for node in plan["nodes"]:
            print(f"      {node}")
    print(f"\nslowest statements by mean at {results[-1]['rows']:,} rows:")
    for s in sorted(results[-1]["statements"], key=lambda s: -s["mean_ms"])[:12]:
        print(f"  {s['mean_ms']:8.3f} ms x{s['calls']:<6} {s['query'][:200]}")
    return {
        "table": {name: values for name, values in table(results)},
        "growing": grown,
        "seq_scans": list(scans.values()),
    }


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
    parser.add_argument("--keep", action="store_true", help="keep each size's database")
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
