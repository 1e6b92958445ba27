"""The worker's /metrics sums what its task processes counted: a finished process's counts stay,
its live gauges (groups in progress, render capacity) go, even when it was killed outright."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest, values

from ocr_worker import metrics_server
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.contracts import PageResult


@pytest.fixture
def multiprocess_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(values, "ValueClass", values.ValueClass)  # restored after the test
    monkeypatch.delenv(metrics_server.MULTIPROC_ENV, raising=False)
    directory = metrics_server.enable_multiprocess_values()
    monkeypatch.setenv(metrics_server.MULTIPROC_ENV, directory)  # removed again afterwards
    yield directory
    metrics_server.remove_values(directory)


def _task_process(pages: list[str], ready: multiprocessing.synchronize.Event) -> None:
    metrics = WorkerMetrics(render_processes=2)
    metrics.pages_finished([PageResult(page=n, status=s) for n, s in enumerate(pages, 1)])  # type: ignore[arg-type]
    metrics.page_rendered(seconds=0.5, waited=0.0)
    with metrics.group_running():
        ready.set()
        signal.pause()  # killed here, a group in hand


def _scrape(directory: str) -> str:
    registry = CollectorRegistry()
    registry.register(metrics_server._LivingProcessesCollector(directory))
    return generate_latest(registry).decode()


def test_counts_of_killed_children_stay_and_their_live_gauges_go(multiprocess_dir: str) -> None:
    fork = multiprocessing.get_context("spawn")  # a fork of a threaded pytest can deadlock
    children = []
    for pages in (["succeeded", "failed"], ["failed"]):
        ready = fork.Event()
        child = fork.Process(target=_task_process, args=(pages, ready))
        child.start()
        assert ready.wait(60)
        children.append(child)
    living = _scrape(multiprocess_dir)
    assert 'uocr_worker_pages_total{outcome="failed"} 2.0' in living
    assert "uocr_worker_page_groups_in_progress 2.0" in living
    assert "uocr_worker_render_processes 4.0" in living
    for child in children:
        child.kill()  # no shutdown signal runs: pruned at scrape
        child.join()
    after = _scrape(multiprocess_dir)
    assert 'uocr_worker_pages_total{outcome="failed"} 2.0' in after
    assert 'uocr_worker_pages_total{outcome="succeeded"} 1.0' in after
    assert "uocr_worker_render_seconds_total 1.0" in after
    assert "uocr_worker_page_groups_in_progress" not in after  # no living process, no value
    assert not list(Path(multiprocess_dir).glob("gauge_live*"))
