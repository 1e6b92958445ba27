"""``uocr worker``: one Celery worker process per GPU, each pinned to its card and named after it.

Each child sees only its card (``CUDA_VISIBLE_DEVICES``), so torch inside it calls it cuda:0, and
Flower lists it as ``gpu<N>@<host>``. Without GPUs one CPU worker runs instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass

from uocr_core.contracts import DEFAULT_MODEL_VERSION, OCR_QUEUES, QUEUE_CONTROL, versioned_queue

# Our app and its tasks; --quiet: no banner printed around the JSON log lines.
CELERY_ARGV = [sys.executable, "-m", "celery", "-A", "ocr_worker.tasks", "--quiet"]


@dataclass(frozen=True)
class WorkerSpec:
    node_name: str
    env: dict[str, str]
    argv: list[str]


def detect_gpu_count() -> int:
    """Cards on this host: ``UOCR_GPU_COUNT`` if set (tests, containers), else nvidia-smi."""
    if (forced := os.environ.get("UOCR_GPU_COUNT")) is not None:
        return int(forced)
    if shutil.which("nvidia-smi") is None:
        return 0
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines())


def parse_gpus(spec: str, available: int) -> list[int]:
    """'all' -> every card, '0,1' -> those cards, 'none' -> []; unknown cards are refused."""
    if spec == "none":
        return []
    if spec == "all":
        return list(range(available))
    try:
        cards = sorted({int(part) for part in spec.split(",")})
    except ValueError:
        raise ValueError(
            f"--gpus takes 'all', 'none' or card numbers like '0,1', got {spec!r}"
        ) from None
    missing = [card for card in cards if not 0 <= card < available]
    if missing:
        raise ValueError(f"--gpus names card(s) {missing}, but this host has {available} GPU(s)")
    return cards


def worker_specs(
    cards: list[int],
    *,
    concurrency: int,
    gpu_concurrency: int = 16,
    queues: tuple[str, ...] = OCR_QUEUES,
    host: str | None = None,
    extra_args: tuple[str, ...] = (),
    model_version: str | None = None,
) -> list[WorkerSpec]:
    """``model_version``: the version every worker serves; its OCR queues replace the plain ones
    (ocr.long -> ocr.long.<version>) and its name is in the node name Flower lists."""
    host = host or socket.gethostname()
    served: dict[str, str] = {}
    if not set(queues) & set(OCR_QUEUES):
        # No OCR queue (e.g. control only): a model would take the card's memory and, each time
        # a prefork child is recycled, a minute of loading, for tasks that never use it.
        served["UOCR_WORKER__PRELOAD_ENGINE"] = "false"
    if model_version is not None:
        queues = tuple(versioned_queue(queue, model_version) for queue in queues)
        served["UOCR_WORKER__MODEL_VERSION"] = model_version
    base = [*CELERY_ARGV, "worker", "--pool", "prefork", "-Q", ",".join(queues), "-E", *extra_args]
    if not cards:
        name = node_name("cpu", host, model_version)
        argv = [*base, "-n", name, "--concurrency", str(concurrency)]
        return [WorkerSpec(name, served, argv)]
    specs = []
    for position, card in enumerate(cards):
        name = node_name(f"gpu{card}", host, model_version)
        # One process per card, the model loaded once in it; its threads feed one decode loop,
        # so up to max_concurrency page groups share each step.
        env = {
            "CUDA_VISIBLE_DEVICES": str(card),
            "UOCR_WORKER__POOL": "threads",
            "UOCR_WORKER__RENDER_PROCESSES": os.environ.get("UOCR_WORKER__RENDER_PROCESSES", "2"),
            **served,
            **_metrics_port(position),
        }
        argv = [*base, "-n", name, "--concurrency", str(gpu_concurrency)]
        argv[argv.index("prefork")] = "threads"
        specs.append(WorkerSpec(name, env, argv))
    return specs


def node_name(kind: str, host: str, model_version: str | None) -> str:
    """``cpu@host``, or ``cpu-v2@host`` for a named version: Flower's workers list shows it."""
    if model_version in (None, DEFAULT_MODEL_VERSION):
        return f"{kind}@{host}"
    return f"{kind}-{model_version}@{host}"


def _metrics_port(position: int) -> dict[str, str]:
    """Workers of one host cannot share a port: the Nth card's serves on the base port + N."""
    base = os.environ.get("UOCR_WORKER__METRICS_PORT")
    return {"UOCR_WORKER__METRICS_PORT": str(int(base) + position)} if base else {}


def run_workers(specs: list[WorkerSpec]) -> int:
    """Start every worker, forward SIGINT/SIGTERM, and return when all have exited."""
    children = [subprocess.Popen(spec.argv, env={**os.environ, **spec.env}) for spec in specs]

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [child.wait() for child in children]
    return max(codes, default=0)


__all__ = [
    "QUEUE_CONTROL",
    "WorkerSpec",
    "detect_gpu_count",
    "parse_gpus",
    "run_workers",
    "worker_specs",
]
