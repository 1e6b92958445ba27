"""A document through page groups: claim → render → decode → store → report → advance.

Every step is safe to run twice. A group is claimed under a row lock with a lease; pages are
written to fixed keys before their rows are marked done; the next group is queued only once.
A group whose worker died is taken over when its lease expires (see ``recover_stale_groups``).

This module is the driver: each stage lives in ``ocr_worker.stages`` and is called here in
the order of a group's life, with only the parts of this worker it needs.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import structlog
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.engines.base import OcrEngine
from ocr_worker.imaging import PageRasterizer, ProcessRasterizer
from ocr_worker.stage_clock import clock
from ocr_worker.stages import render
from ocr_worker.stages.advance import advance_job
from ocr_worker.stages.claim import SETTLED, ClaimedGroup, claim_group
from ocr_worker.stages.decode import decode_group
from ocr_worker.stages.lease import LeaseKeeper, release_claim
from ocr_worker.stages.record import record_group
from ocr_worker.stages.settle import settle_job
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.contracts import DEFAULT_MODEL_VERSION, PageResult
from uocr_core.dispatch import Dispatcher
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore
from uocr_core.transient import is_transient

log = structlog.get_logger(__name__)


@dataclass
class PageGroupPipeline:
    sessions: sessionmaker[Session]
    store: ObjectStore
    engine: OcrEngine
    dispatcher: Dispatcher
    settings: Settings
    worker_id: str
    # The model version this worker serves: it runs only that version's jobs, and every page
    # it records says so (with the engine), in the status and in the results.
    model_version: str = DEFAULT_MODEL_VERSION
    metrics: WorkerMetrics | None = None
    rasterizer: PageRasterizer = field(init=False)
    # Claims whose release failed (the database was down): given back by the next task here,
    # rather than held until their lease lapses. Token-fenced, so a late release is harmless.
    _unreleased: list[ClaimedGroup] = field(init=False, default_factory=list)
    _unreleased_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    render_pool: ProcessRasterizer | None = field(init=False)

    def __post_init__(self) -> None:
        self.rasterizer = render.rasterizer_for(self.store, self.settings)
        self.render_pool = render.render_pool_for(self.settings, self.metrics)

    def run(self, job_id: str, group_index: int) -> str:
        """Run one page group; returns what happened (for logs and tests)."""
        bound = log.bind(job_id=job_id, page_group=group_index)
        self._release_unreleased()
        claimed = self._claim(job_id, group_index)
        if isinstance(claimed, str):
            bound.info("page_group.skipped", reason=claimed)
            if claimed in SETTLED:  # nothing to run here, but the document may move on
                self._advance(job_id, group_index)
            return claimed
        started = time.perf_counter()
        with self._leased(claimed):
            results = self._decode(job_id, claimed)
            with clock.timed("store"):
                recorded = self._record(job_id, claimed, results)
        if not recorded:
            bound.warning("page_group.lease_lost")  # taken over meanwhile; its new owner records
            return "lease_lost"
        if self.metrics is not None:
            self.metrics.pages_finished(results)
        self._advance(job_id, group_index)
        bound.info("page_group.finished", **self._summary(results, started))
        return "ran"

    def _advance(self, job_id: str, group_index: int) -> None:
        """Advance the document past this group, then settle whatever that left to settle."""
        ending = advance_job(
            job_id,
            group_index,
            sessions=self.sessions,
            store=self.store,
            dispatcher=self.dispatcher,
            settings=self.settings,
            render_pool=self.render_pool,
        )
        settle_job(
            job_id,
            ending,
            sessions=self.sessions,
            store=self.store,
            dispatcher=self.dispatcher,
            engine=self.engine,
            settings=self.settings,
            render_pool=self.render_pool,
        )

    @contextmanager
    def _leased(self, claimed: ClaimedGroup) -> Iterator[None]:
        """The claim's lease kept alive while the group runs (for its time limit at most),
        and given back at once if the task fails in a way that is retried."""
        try:
            with (
                self.metrics.group_running() if self.metrics is not None else nullcontext(),
                LeaseKeeper(
                    self.sessions,
                    group_id=claimed.group_id,
                    owner=claimed.lease_token,
                    lease_seconds=self.settings.worker.lease_seconds,
                    deadline_seconds=self.settings.group_time_limit(
                        len(claimed.context) + len(claimed.pages)
                    ),
                ),
            ):
                yield
        except Exception as error:
            if is_transient(error):  # the task is retried: give the group back now
                self._release(claimed)
            raise

    def _summary(self, results: list[PageResult], started: float) -> dict[str, object]:
        """The fields of the group's one summary line (``page_group.finished``)."""
        return {
            "model_version": self.model_version,
            "pages": len(results),
            "failed": sum(r.status == "failed" for r in results),
            "seconds": round(time.perf_counter() - started, 3),
            "stage_totals": clock.totals(),
        }

    # Giving a claim back stays with the driver: it is the task's retry policy, not a stage
    # (tests/worker/test_lease.py stands the database down by patching this module's
    # ``release_claim``).
    def _release(self, claimed: ClaimedGroup) -> None:
        try:
            release_claim(self.sessions, group_id=claimed.group_id, owner=claimed.lease_token)
        except Exception as error:  # the database is still down: the task's retry releases it
            log.warning("page_group.release_failed", error=str(error))
            with self._unreleased_lock:
                self._unreleased.append(claimed)

    def _release_unreleased(self) -> None:
        with self._unreleased_lock:
            waiting, self._unreleased = self._unreleased, []
        for claimed in waiting:
            self._release(claimed)

    # -- the stages with this worker's parts: ``run`` calls them in turn, and tests that stop
    # between stages (a worker dying mid-way, a lease taken over) call them one at a time
    # (tests/worker/test_lease.py, test_reconciler.py). Properties, not methods, so that a job
    # id followed through ``run`` enters this module once, not again before each stage.

    @property
    def _claim(self) -> Callable[[str, int], ClaimedGroup | str]:
        return functools.partial(
            claim_group,
            sessions=self.sessions,
            dispatcher=self.dispatcher,
            settings=self.settings.worker,
            worker_id=self.worker_id,
            model_version=self.model_version,
        )

    @property
    def _decode(self) -> Callable[[str, ClaimedGroup], list[PageResult]]:
        return functools.partial(
            decode_group,
            engine=self.engine,
            model_version=self.model_version,
            rasterizer=self.rasterizer,
            render_pool=self.render_pool,
        )

    @property
    def _record(self) -> Callable[[str, ClaimedGroup, list[PageResult]], bool]:
        return functools.partial(record_group, sessions=self.sessions, store=self.store)
