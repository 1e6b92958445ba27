"""A document's next page group, rendered while this group decodes.

A GPU worker decodes a document's groups one after another (each reuses the KV of the group
before it), so each group's render sat between two decodes of its document. At 128 documents in
flight on the H200, whose groups finish in the same steps and then render together, that was
~2 s a group with the GPU running half its sequences (bench/RESULTS.md). The render processes
are idle most of the time: the next group's pages go to them as soon as this group's are drawn,
and the next group's task, when it runs on this worker in time, takes them from here.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from ocr_worker.imaging import PageRenderError, ProcessRasterizer, RenderedPage, Rendering

# Pages never taken (the next group ran on another worker, or the document was canceled) are
# dropped after this long, so their pixels do not stay in memory.
UNCLAIMED_SECONDS = 120.0

PageKey = tuple[str, int]  # (source_key, source_index)


@dataclass
class _Started:
    long_side: int | None
    renderings: dict[PageKey, Rendering]
    at: float


class NextGroupPages:
    """At most ``max_documents`` documents' next groups held (about 2.4 MB a page at 1024
    pixels, so 128 documents of 9-page groups hold ~2.8 GB); the oldest goes first."""

    def __init__(self, pool: ProcessRasterizer, *, max_documents: int) -> None:
        self.pool = pool
        self.max_documents = max_documents
        self._started: OrderedDict[str, _Started] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, job_id: str, refs: list[PageKey], long_side: int | None) -> None:
        """Begin rendering ``job_id``'s next group's pages, unless they are already begun."""
        with self._lock:
            self._drop_unclaimed(time.monotonic())
            if job_id in self._started or not refs or self.max_documents <= 0:
                return
            renderings = dict(zip(refs, self.pool.submit(refs, long_side), strict=True))
            self._started[job_id] = _Started(long_side, renderings, time.monotonic())
            while len(self._started) > self.max_documents:
                _cancel(self._started.popitem(last=False)[1])

    def render(
        self, job_id: str, refs: list[PageKey], long_side: int | None
    ) -> list[RenderedPage | PageRenderError]:
        """``refs`` drawn, in order: those begun ahead for this document taken from there (drawn
        at the same size), the rest rendered now."""
        with self._lock:
            started = self._started.pop(job_id, None)
            self._drop_unclaimed(time.monotonic())
        if started is None or started.long_side != long_side:
            if started is not None:
                _cancel(started)
            return self.pool.render_many(refs, long_side)
        ahead = started.renderings
        missing = [ref for ref in refs if ref not in ahead]
        ahead |= dict(zip(missing, self.pool.submit(missing, long_side), strict=True))
        renderings = [ahead.pop(ref) for ref in refs]
        used = {id(r.future) for r in renderings}  # a run's pages share one future
        for rendering in ahead.values():  # begun for pages this group no longer needs
            if id(rendering.future) not in used:
                rendering.future.cancel()
        return self.pool.collect(renderings)

    def held(self) -> int:
        """Documents whose next group's pages are held."""
        with self._lock:
            return len(self._started)

    def drawn(self, job_id: str) -> int:
        """How many of ``job_id``'s next group's pages are drawn already."""
        with self._lock:
            started = self._started.get(job_id)
            renderings = list(started.renderings.values()) if started else []
        return sum(r.future.done() and not r.future.cancelled() for r in renderings)

    def _drop_unclaimed(self, now: float) -> None:
        while self._started:
            job_id, oldest = next(iter(self._started.items()))
            if now - oldest.at < UNCLAIMED_SECONDS:
                return
            _cancel(self._started.pop(job_id))


def _cancel(started: _Started) -> None:
    for rendering in started.renderings.values():
        rendering.future.cancel()  # a page still queued is never drawn; a drawn one is freed
