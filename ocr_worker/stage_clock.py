"""Where a worker's time goes: seconds summed per stage over all its threads.

A GPU worker runs up to ``max_concurrency`` page groups at once, so per-group wall times overlap
and say little; the sums say which stage holds the card back. Stages: ``render`` (pages to
pixels), ``vision`` (the vision tower), ``prefill`` and ``decode`` (the decode loop's GPU work),
``idle`` (the decode loop waiting for a request: the GPU has nothing to do), ``store`` (results
to Postgres and object storage). Counts, not seconds: ``tokens`` (decoded tokens), ``steps``
(decode steps), ``step_rows`` (sequences summed over steps: the mean batch of a step) and
``prefill_passes`` (the prefills the loop ran, each for the groups admitted together).
Logged with every finished page group (``page_group.finished``, field ``stage_totals``) and
read by bench/gpu_service_bench.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class StageClock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: defaultdict[str, float] = defaultdict(float)

    def add(self, stage: str, amount: float) -> None:
        with self._lock:
            self._totals[stage] += amount

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)

    def totals(self) -> dict[str, float]:
        with self._lock:
            return {stage: round(value, 3) for stage, value in self._totals.items()}


COUNTS = ("tokens", "steps", "step_rows", "prefill_passes")  # the totals that are not seconds

clock = StageClock()  # one per process: a GPU worker is one process per card
