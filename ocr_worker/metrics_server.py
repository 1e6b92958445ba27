"""The worker's ``/metrics``: served by its main process, summing what every task process counts.

Why prometheus_client's multiprocess mode and not one HTTP server per task process: a prefork
worker's tasks run in children that come and go (``max_memory_per_child_mb`` replaces them), so
per-child ports would change under Prometheus, and a replaced child's counts would vanish with
it. In multiprocess mode each child writes its values to files in a directory of this worker's
own, and the main process (which outlives every child) serves their sum on one port: counters
keep what finished children counted, and "live" gauges keep only living processes. A threads
worker (the GPU engine) is one process and uses the same path.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from collections.abc import Iterable

import structlog
from prometheus_client import CollectorRegistry, start_http_server, values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from ocr_worker.gpu_metrics import GpuCollector
from uocr_core.settings import Settings

log = structlog.get_logger(__name__)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_LIVE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db$")


def enable_multiprocess_values() -> str:
    """A fresh directory for this worker's values (a stale one would add a previous run's
    counts), in the environment its children inherit. Call before the pool forks, and before
    any metric is built."""
    directory = tempfile.mkdtemp(prefix="uocr-worker-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    # prometheus_client picks its value class from the environment when first imported, which
    # may have been before this ran (the worker imports everything at start): choose again.
    values.ValueClass = values.get_value_class()
    return directory


def serve_worker_metrics(settings: Settings, directory: str) -> None:
    """Start the HTTP server in a thread of this (the main) process."""
    assert settings.worker.metrics_port is not None
    registry = CollectorRegistry()
    registry.register(_LivingProcessesCollector(directory))
    if settings.engine == "unlimited_ocr" and (gpus := GpuCollector.open()) is not None:
        registry.register(gpus)
    start_http_server(settings.worker.metrics_port, registry=registry)
    log.info("worker.metrics_listening", port=settings.worker.metrics_port)


def forget_process(pid: int) -> None:
    """A task process ends: its live gauges (groups in progress, render capacity) go with it."""
    if os.environ.get(MULTIPROC_ENV):
        mark_process_dead(pid)


def remove_values(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


class _LivingProcessesCollector(MultiProcessCollector):
    """A child killed outright (SIGKILL, OOM) never says it ended: its live gauges are dropped
    here, at scrape time, once its process is gone."""

    def __init__(self, directory: str) -> None:
        super().__init__(None, path=directory)  # registered by the caller
        self.directory = directory

    def collect(self) -> Iterable[Metric]:
        for path in glob.glob(os.path.join(self.directory, "gauge_live*.db")):
            found = _LIVE_FILE.search(path)
            if found and not _alive(int(found.group(1))):
                mark_process_dead(int(found.group(1)), self.directory)
        return super().collect()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
