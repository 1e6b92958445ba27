"""The scale bench's own Postgres (pg_stat_statements, auto_explain) and the counters it reads:
each process tree's CPU, the database's rows and WAL, Redis's CPU, the S3 server's requests."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import psycopg
import redis

from bench import harness
from tests.e2e.processes import free_port

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
