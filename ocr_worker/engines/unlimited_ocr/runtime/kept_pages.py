"""Boundary pages a document keeps in the workspace for its next page group.

A cache, not a reservation: the next group may land on another worker (which recomputes those
pages), so kept pages expire after ``kept_seconds``, and the oldest go back to the pool first
whenever a waiting request lacks blocks. Celery threads take and put; the decode-loop thread
evicts; one lock keeps a set from being both reused and freed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment


@dataclass
class KeptPages:
    job_id: str
    page_nos: tuple[int, ...]
    segments: list[Segment]  # BOS + the boundary pages, in the pool
    since: float  # monotonic time kept
    # The output the previous group wrote for these pages (sections.kept_section_ids): the next
    # group is fed it instead of decoding these pages again; empty: it decodes them.
    section_ids: tuple[int, ...] = ()


class KeptPagesCache:
    def __init__(self, kept_seconds: float) -> None:
        self.kept_seconds = kept_seconds
        self._by_job: dict[str, KeptPages] = {}  # insertion order = age
        self._lock = threading.Lock()

    def put(
        self, job_id: str, segments: list[Segment], section_ids: tuple[int, ...] = ()
    ) -> KeptPages | None:
        """Keep ``segments`` (and the output written for their pages) for the job's next
        group; returns what the job kept before."""
        page_nos = tuple(s.page_no for s in segments if s.kind == "page" and s.page_no is not None)
        with self._lock:
            previous = self._by_job.pop(job_id, None)
            self._by_job[job_id] = KeptPages(
                job_id, page_nos, segments, time.monotonic(), section_ids
            )
        return previous

    def take(self, job_id: str) -> KeptPages | None:
        with self._lock:
            return self._by_job.pop(job_id, None)

    def take_expired(self) -> list[KeptPages]:
        cutoff = time.monotonic() - self.kept_seconds
        with self._lock:
            expired = [k for k in self._by_job.values() if k.since < cutoff]
            for kept in expired:
                del self._by_job[kept.job_id]
        return expired

    def take_oldest(self) -> KeptPages | None:
        with self._lock:
            oldest = next(iter(self._by_job), None)
            return None if oldest is None else self._by_job.pop(oldest)

    def __len__(self) -> int:
        return len(self._by_job)
