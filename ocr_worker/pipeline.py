"""A document through page groups: claim → render → decode → record → advance → settle.

Every step is safe to run twice. A group is claimed under a row lock with a lease; pages are
written to fixed keys before their rows are marked done; the next group is queued only once.
A group whose worker died is taken over when its lease expires (see ``recover_stale_groups``).

This module is the driver: each stage lives in ``ocr_worker.stages`` and ``run`` calls them
in the order of a group's life, each once, with this worker's parts (``StageParts``).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
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
from ocr_worker.stages.lease import HeldClaims
from ocr_worker.stages.parts import StageParts
from ocr_worker.stages.record import record_group
from ocr_worker.stages.settle import settle_job
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.contracts import DEFAULT_MODEL_VERSION, PageResult
from uocr_core.dispatch import Dispatcher
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore

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
    render_pool: ProcessRasterizer | None = field(init=False)
    claims: HeldClaims = field(init=False)

    def __post_init__(self) -> None:
        self.rasterizer = render.rasterizer_for(self.store, self.settings)
        self.render_pool = render.render_pool_for(self.settings, self.metrics)
        self.claims = HeldClaims(self.sessions, lease_seconds=self.settings.worker.lease_seconds)

    @property
    def parts(self) -> StageParts:
        """What the stages work with, as this worker has it now."""
        return StageParts(
            self.sessions,
            self.store,
            self.dispatcher,
            self.engine,
            self.settings,
            self.worker_id,
            self.model_version,
            self.rasterizer,
            self.render_pool,
        )

    def run(self, job_id: str, group_index: int) -> str:
        """Run one page group; returns what happened (for logs and tests)."""
        bound = log.bind(job_id=job_id, page_group=group_index)
        self.claims.release_waiting()
        parts, started = self.parts, time.perf_counter()
        claimed = claim_group(job_id, group_index, parts)
        results: list[PageResult] = []
        if isinstance(claimed, str):  # nothing to run here, but the document may move on
            bound.info("page_group.skipped", reason=claimed)
            outcome = claimed
        else:
            pages = len(claimed.context) + len(claimed.pages)
            with (
                self._running(),
                self.claims.held(
                    group_id=claimed.group_id,
                    owner=claimed.lease_token,
                    deadline_seconds=self.settings.group_time_limit(pages),
                ),
            ):
                results = decode_group(job_id, claimed, parts)
                with clock.timed("store"):
                    recorded = record_group(job_id, claimed, results, parts)
            outcome = "ran" if recorded else "lease_lost"
        if outcome == "lease_lost":  # taken over meanwhile; its new owner records
            bound.warning("page_group.lease_lost")
            return outcome
        if outcome == "ran" and self.metrics is not None:
            self.metrics.pages_finished(results)
        if outcome == "ran" or outcome in SETTLED:
            ending = advance_job(job_id, group_index, parts)
            settle_job(job_id, ending, parts)
        if outcome == "ran":
            bound.info(
                "page_group.finished",
                model_version=self.model_version,
                pages=len(results),
                failed=sum(r.status == "failed" for r in results),
                seconds=round(time.perf_counter() - started, 3),
                stage_totals=clock.totals(),
            )
        return outcome

    def _running(self) -> AbstractContextManager[None]:
        return self.metrics.group_running() if self.metrics is not None else nullcontext()

    # -- one stage at a time, for tests that stop between stages (a worker dying mid-way, a
    # lease taken over: tests/worker/test_lease.py, test_reconciler.py)

    def _claim(self, job_id: str, group_index: int) -> ClaimedGroup | str:
        return claim_group(job_id, group_index, self.parts)

    def _decode(self, job_id: str, claimed: ClaimedGroup) -> list[PageResult]:
        return decode_group(job_id, claimed, self.parts)

    def _record(self, job_id: str, claimed: ClaimedGroup, results: list[PageResult]) -> bool:
        return record_group(job_id, claimed, results, self.parts)
