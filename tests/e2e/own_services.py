"""A Redis and a Postgres of a test's own, on free ports, that the test may kill and restart,
and a network gate to the object store that it may cut.

The session's shared servers are used by every other test (and other test sessions): a fault
test never touches them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import create_engine, text

from tests.e2e.processes import free_port, wait_until
from uocr_core.migrate import upgrade

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


class NetworkGate:
    """A TCP path to a server that a test can cut and restore: the object store unreachable
    (connections refused, open ones reset) while its data stays, as in a network partition or
    a store restarting. The shared moto server keeps objects only in memory, so it is never
    stopped itself."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._open = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open(self) -> NetworkGate:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._listener = listener
        self._open.set()
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        """New connections refused, open ones reset."""
        self._open.clear()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
            listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while self._open.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
        with self._lock:
            self._sockets.discard(source)
