"""What one worker process counts for Prometheus: pages, groups in hand, render time, tokens.

Built after the fork, in the process that runs the tasks. In a prefork worker that is a child,
so the values go to prometheus_client's multiprocess files and the main process serves their
sum (``ocr_worker/metrics_server.py``); a threads worker is one process and does the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from uocr_core.contracts import PageResult

RENDER_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60)


class WorkerMetrics:
    def __init__(self, *, render_processes: int) -> None:
        # A registry of its own: the values live in the multiprocess files, and building a
        # second WorkerMetrics in one process (tests) must not clash in the default registry.
        registry = CollectorRegistry()
        self.pages = Counter(
            "uocr_worker_pages",
            "Pages this worker finished, by outcome",
            ["outcome"],
            registry=registry,
        )
        self.groups_in_progress = Gauge(
            "uocr_worker_page_groups_in_progress",
            "Page groups this worker is running now",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.render_seconds = Counter(
            "uocr_worker_render_seconds",
            "Seconds the render processes spent drawing pages (busy time)",
            registry=registry,
        )
        self.render_wait = Histogram(
            "uocr_worker_render_wait_seconds",
            "How long a page waited for a free render process",
            buckets=RENDER_WAIT_BUCKETS,
            registry=registry,
        )
        self.render_processes = Gauge(
            "uocr_worker_render_processes",
            "Render processes beside the tasks (the render capacity)",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.tokens = Counter(
            "uocr_worker_generated_tokens",
            "Tokens the GPU engine generated",
            registry=registry,
        )
        for outcome in ("succeeded", "failed"):  # present at 0 before the first page
            self.pages.labels(outcome)
        self.render_processes.set(render_processes)

    @contextmanager
    def group_running(self) -> Iterator[None]:
        self.groups_in_progress.inc()
        try:
            yield
        finally:
            self.groups_in_progress.dec()

    def pages_finished(self, results: Sequence[PageResult]) -> None:
        for result in results:
            self.pages.labels(result.status).inc()

    def page_rendered(self, *, seconds: float, waited: float) -> None:
        self.render_seconds.inc(seconds)
        self.render_wait.observe(waited)

    def tokens_generated(self, count: int) -> None:
        self.tokens.inc(count)
