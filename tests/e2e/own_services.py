"""A Redis and a Postgres of a test's own, on free ports, that the test may kill and restart.

The session's shared servers are used by every other test (and other test sessions): a fault
test never touches them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import create_engine, text

from ocr_api.core.migrate import upgrade
from tests.e2e.processes import free_port, wait_until

_PG_BIN = (
    sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    if Path("/usr/lib/postgresql").exists()
    else Path("/usr/bin")
)


@dataclass
class OwnRedis:
    port: int = field(default_factory=free_port)
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> OwnRedis:
        argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        argv += ["--save", "", "--appendonly", "no"]  # as in production without persistence
        self.popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        wait_until(lambda: _pings(client), 20, what=f"redis on {self.port}")
        return self

    def kill(self) -> None:
        """Every queued and unacked message goes with it, as in a restart without persistence."""
        if self.popen and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@dataclass
class OwnPostgres:
    port: int = field(default_factory=free_port)
    data_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="uocr-pg-")))

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/uocr"

    def init(self) -> OwnPostgres:
        shutil.chown(self.data_dir, "postgres")
        os.chmod(self.data_dir, 0o700)
        self._as_postgres(
            f"{_PG_BIN}/initdb -D {self.data_dir}/db -U postgres --auth=trust -E UTF8 "
            "--locale=C.UTF-8"
        )
        self.start()
        admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("CREATE DATABASE uocr"))
        admin.dispose()
        upgrade(self.url)
        return self

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data_dir} -c fsync=off"
        self._as_postgres(
            f"{_PG_BIN}/pg_ctl -D {self.data_dir}/db -l {self.data_dir}/log -w start -o '{options}'"
        )

    def stop(self) -> None:
        """Immediate shutdown: open connections are cut, as when the server goes away."""
        self._as_postgres(f"{_PG_BIN}/pg_ctl -D {self.data_dir}/db -m immediate -w stop")

    def destroy(self) -> None:
        subprocess.run(
            ["su", "postgres", "-c", f"{_PG_BIN}/pg_ctl -D {self.data_dir}/db -m immediate stop"],
            capture_output=True,
        )
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def _as_postgres(self, command: str) -> None:
        subprocess.run(["su", "postgres", "-c", command], check=True, capture_output=True)
