"""Real processes for end-to-end tests: the API (uvicorn), Celery workers, Flower, a receiver."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from ocr_worker.launcher import CELERY_ARGV


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Process:
    """A subprocess in its own process group, so a kill reaches its children too."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def signal(self, signum: int) -> None:
        if self.popen and self.popen.poll() is None:
            os.killpg(self.popen.pid, signum)

    def stop(self, timeout: float = 20) -> None:
        if not self.popen or self.popen.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait(5)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.popen:
            self.popen.wait(10)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def celery_worker(
    env: dict[str, str], logs: Path, *, name: str, queues: str, beat: bool
) -> Process:
    argv = [
        *CELERY_ARGV,
        "worker",
        "--pool",
        "prefork",
        "-c",
        "1",
        "-Q",
        queues,
        "-n",
        name,
        "-E",
    ]
    if beat:
        argv += ["-B", "-s", str(logs / f"beat-{name}.db")]
    return Process(argv, env, logs / f"worker-{name.split('@')[0]}.log")


UOCR_ARGV = [sys.executable, "-m", "uocr_cli"]  # the `uocr` command, as operators run it
# Flower's credentials in the e2e deployment (Flower refuses to start without some).
FLOWER_USER, FLOWER_PASSWORD = "e2e", "flower-e2e-password"


def api_server(env: dict[str, str], logs: Path, port: int, workers: int = 1) -> Process:
    argv = [*UOCR_ARGV, "api", "--host", "127.0.0.1", "--port", str(port)]
    return Process([*argv, "--workers", str(workers)], env, logs / "api.log")


def flower(env: dict[str, str], logs: Path, port: int) -> Process:
    """Flower on loopback (its default), asking for FLOWER_USER:FLOWER_PASSWORD."""
    credentials = {"FLOWER_BASIC_AUTH": f"{FLOWER_USER}:{FLOWER_PASSWORD}"}
    argv = [*UOCR_ARGV, "flower", f"--port={port}"]
    return Process(argv, {**env, **credentials}, logs / "flower.log")


def wait_http(url: str, timeout: float = 30) -> None:
    def up() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code < 500
        except httpx.HTTPError:
            return False

    wait_until(up, timeout, what=url)


@dataclass
class ReceivedWebhook:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    """A local HTTP receiver; ``responses[path]`` lists the statuses to answer, in order."""

    port: int = field(default_factory=free_port)
    received: list[ReceivedWebhook] = field(default_factory=list)
    responses: dict[str, list[int]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def for_path(self, path: str) -> list[ReceivedWebhook]:
        return [hook for hook in self.received if hook.path == path]

    def start(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(ReceivedWebhook(self.path, dict(self.headers), body))
                planned = receiver.responses.get(self.path) or [200]
                status = planned.pop(0) if len(planned) > 1 else planned[0]
                self.send_response(status)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
