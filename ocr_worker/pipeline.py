"""A document through page groups: claim → render → decode → store → report → advance.

Every step is safe to run twice. A group is claimed under a row lock with a lease; pages are
written to fixed keys before their rows are marked done; the next group is queued only once.
A group whose worker died is taken over when its lease expires (see ``recover_stale_groups``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.engines.base import OcrEngine, PageGroupInput, PageImage
from ocr_worker.imaging import (
    PageRasterizer,
    PageRenderError,
    ProcessRasterizer,
    RenderedPage,
    render_many,
)
from ocr_worker.outputs import assembly
from ocr_worker.outputs.searchable_pdf import build_in_render_process
from ocr_worker.stage_clock import clock
from ocr_worker.stages.lease import LeaseKeeper, new_lease_token, release_claim
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core import job_lifecycle, object_keys
from uocr_core.contracts import DEFAULT_MODEL_VERSION, PageResult
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher, queue_group
from uocr_core.models import Job, Page, PageGroup
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore
from uocr_core.transient import is_transient
from uocr_core.webhooks.events import record_job_finished

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PageRef:
    position: int
    page_no: int
    source_key: str
    source_index: int


@dataclass(frozen=True)
class ClaimedGroup:
    group_id: int
    group_index: int
    context: list[PageRef]
    pages: list[PageRef]  # output pages not yet done
    is_last: bool
    lease_token: str  # this claim's, fencing its renewals and its record
    interactive: bool = False  # the job's priority: the engine takes it ahead of the backlog


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
        w = self.settings.worker
        self.rasterizer = PageRasterizer(self.store, dpi=w.render_dpi, max_side=w.max_render_side)
        self.render_pool = (
            ProcessRasterizer(
                self.settings.s3,
                dpi=w.render_dpi,
                max_side=w.max_render_side,
                processes=w.render_processes,
                metrics=self.metrics,
            )
            if w.render_processes
            else None
        )

    def run(self, job_id: str, group_index: int) -> str:
        """Run one page group; returns what happened (for logs and tests)."""
        bound = log.bind(job_id=job_id, page_group=group_index)
        self._release_unreleased()
        claimed = self._claim(job_id, group_index)
        if isinstance(claimed, str):
            bound.info("page_group.skipped", reason=claimed)
            if claimed in ("done", "gave_up", "canceled"):
                self._advance(job_id, group_index)
            return claimed
        started = time.perf_counter()
        try:
            with (
                self._counted(),
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
                results = self._decode(job_id, claimed)
                with clock.timed("store"):
                    recorded = self._record(job_id, claimed, results)
        except Exception as error:
            if is_transient(error):  # the task is retried: give the group back now
                self._release(claimed)
            raise
        if not recorded:
            bound.warning("page_group.lease_lost")  # taken over meanwhile; its new owner records
            return "lease_lost"
        if self.metrics is not None:
            self.metrics.pages_finished(results)
        self._advance(job_id, group_index)
        bound.info(
            "page_group.finished",
            model_version=self.model_version,
            pages=len(results),
            failed=sum(r.status == "failed" for r in results),
            seconds=round(time.perf_counter() - started, 3),
            stage_totals=clock.totals(),
        )
        return "ran"

    def _counted(self) -> AbstractContextManager[None]:
        return self.metrics.group_running() if self.metrics is not None else nullcontext()

    # -- claim ---------------------------------------------------------------------------------

    def _claim(self, job_id: str, group_index: int) -> ClaimedGroup | str:
        with transaction(self.sessions) as session:
            job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
            group = _lock_group(session, job_id, group_index)
            if group is None or job is None:
                return "missing"
            if job.status in job_lifecycle.TERMINAL:
                return "finished"  # a late redelivery: the job ended meanwhile
            if job.cancel_requested:
                return "canceled"
            if group.status in job_lifecycle.GROUP_FINISHED:
                return "done"
            if (job.model_version or DEFAULT_MODEL_VERSION) != self.model_version:
                # A message on the wrong queue (a worker started with other queues by hand):
                # sent back to the job's own version rather than run on this one.
                queue_group(self.dispatcher, group, priority=job.priority)
                return "other_version"
            now = utcnow()
            if (
                group.status == "running"
                and group.lease_expires_at
                and group.lease_expires_at > now
            ):
                return "leased"
            if group.attempts >= self.settings.worker.max_group_attempts:
                self._give_up(session, job, group)
                return "gave_up"
            job_lifecycle.start(job)
            group.status = "running"
            group.attempts += 1
            group.lease_owner = new_lease_token(self.worker_id)
            group.lease_expires_at = now + timedelta(seconds=self.settings.worker.lease_seconds)
            group.started_at = group.started_at or now
            return self._claimed(session, job, group)

    def _claimed(self, session: Session, job: Job, group: PageGroup) -> ClaimedGroup:
        rows = _pages_between(session, job.id, group.first_position, group.last_position)
        context_end = group.first_position + group.overlap
        pages = [p for p in rows if p.position >= context_end and p.status != "succeeded"]
        for page in pages:
            page.status, page.started_at = "running", utcnow()
            page.attempts += 1
        return ClaimedGroup(
            group_id=group.id,
            group_index=group.group_index,
            context=[_ref(p) for p in rows if p.position < context_end],
            pages=[_ref(p) for p in pages],
            is_last=group.last_position == job.page_count - 1,
            lease_token=group.lease_owner or "",
            interactive=job.priority == "interactive",
        )

    def _give_up(self, session: Session, job: Job, group: PageGroup) -> None:
        """A poison group: its pages fail with the reason, the rest of the document goes on."""
        reason = f"gave up after {group.attempts} attempts (the page group kept failing)"
        for page in _group_pages(session, group):
            if page.status != "succeeded":
                page.status, page.error, page.finished_at = "failed", reason, utcnow()
        group.status, group.finished_at, group.lease_owner = "failed", utcnow(), None
        _recount(session, job)
        log.error("page_group.gave_up", job_id=job.id, page_group=group.group_index)

    # -- decode --------------------------------------------------------------------------------

    def _decode(self, job_id: str, claimed: ClaimedGroup) -> list[PageResult]:
        context = claimed.context if self.engine.uses_context_pages else []
        rendered, flags = self._render([*context, *claimed.pages])
        context_images = [i for i in rendered[: len(context)] if isinstance(i, PageImage)]
        if len(context_images) < len(context):  # an unreadable boundary page: decode without it
            context_images = []
        failed: dict[int, PageResult] = {}
        images = []
        for ref, item in zip(claimed.pages, rendered[len(context) :], strict=True):
            if isinstance(item, PageImage):
                images.append(item)
            else:
                failed[ref.page_no] = PageResult(page=ref.page_no, status="failed", error=str(item))
        group = PageGroupInput(
            job_id,
            claimed.group_index,
            context_images,
            images,
            claimed.is_last,
            interactive=claimed.interactive,
        )
        decoded = self.engine.run_group(group) if images else []
        by_page = {r.page: r for r in decoded} | failed
        missing = [ref.page_no for ref in claimed.pages if ref.page_no not in by_page]
        if missing:  # an engine that drops a page is a bug; record it rather than lose the page
            raise RuntimeError(f"engine {self.engine.name} returned no result for pages {missing}")
        return [self._provenance(_flagged(by_page[ref.page_no], flags)) for ref in claimed.pages]

    def _provenance(self, result: PageResult) -> PageResult:
        engine = result.engine or self.engine.name
        return result.model_copy(update={"engine": engine, "model_version": self.model_version})

    def _render(
        self, refs: list[PageRef]
    ) -> tuple[list[PageImage | PageRenderError], dict[int, tuple[str, ...]]]:
        """Each page's image (or why it has none), and the render's flags by page number."""
        keys = [(ref.source_key, ref.source_index) for ref in refs]
        long_side = self.engine.input_long_side(len(refs))
        with clock.timed("render"):
            rendered = (
                self.render_pool.render_many(keys, long_side)
                if self.render_pool
                else render_many(self.rasterizer, keys, long_side)
            )
        flags = {
            ref.page_no: r.warnings
            for ref, r in zip(refs, rendered, strict=True)
            if isinstance(r, RenderedPage) and r.warnings
        }
        images = [
            r if isinstance(r, PageRenderError) else PageImage(ref.page_no, r.pixels, r.size)
            for ref, r in zip(refs, rendered, strict=True)
        ]
        return images, flags

    # -- record --------------------------------------------------------------------------------

    def _record(self, job_id: str, claimed: ClaimedGroup, results: list[PageResult]) -> bool:
        """Mark the pages done, if the group is still ours: not if its lease lapsed (a database
        outage longer than the lease) and another worker claimed it since. A lapsed lease whose
        group nobody claimed yet is still recorded: the work is done. Checked before the pages
        are written too: their objects are at fixed keys, and a group that overran its time
        limit and was read elsewhere meanwhile must not overwrite its new owner's pages."""
        if not self._still_ours(claimed):
            return False
        keys = assembly.write_pages(self.store, job_id, results)
        with transaction(self.sessions) as session:
            job = session.get(Job, job_id, with_for_update=True)  # lock order: job, then group
            group = session.get(PageGroup, claimed.group_id, with_for_update=True)
            assert group is not None and job is not None
            if not _ours(group.status, group.lease_owner, claimed):
                return False
            if job.deleted_at is not None:  # deleted while it ran: keep nothing of it
                self.store.delete(list(keys.values()))
                group.status, group.finished_at, group.lease_owner = "canceled", utcnow(), None
                return True  # settled: advancing finishes the job, writing nothing
            now = utcnow()
            results_by_page = {r.page: r for r in results}
            for page in _group_pages(session, group):
                result = results_by_page.get(page.page_no)
                if result is None:
                    continue
                page.status, page.error = result.status, result.error
                page.result_key, page.warnings = keys[page.page_no], result.warnings
                page.model_version, page.engine = result.model_version, result.engine
                page.finished_at = now
                page.duration_ms = result.duration_ms or int(
                    (now - (page.started_at or now)).total_seconds() * 1000
                )
            group.status, group.finished_at, group.lease_owner = "done", now, None
            _recount(session, job)
            assembly.write_progress(self.store, job)
            return True

    def _still_ours(self, claimed: ClaimedGroup) -> bool:
        with self.sessions() as session:
            status, owner = session.execute(
                select(PageGroup.status, PageGroup.lease_owner).where(
                    PageGroup.id == claimed.group_id
                )
            ).one()
        return _ours(status, owner, claimed)

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

    # -- advance -------------------------------------------------------------------------------

    def _advance(self, job_id: str, group_index: int) -> None:
        """Queue the next group if it is not queued yet (groups in order), or finish the job
        once every group is settled (in order, or in parallel), or once a cancel was asked and
        no group runs any more. Row locks make it idempotent."""
        finished, complete, delivery_id = False, False, None
        with transaction(self.sessions) as session:
            job = session.get(Job, job_id, with_for_update=True)
            if job is None or job.status in job_lifecycle.TERMINAL:
                return
            following = _lock_group(session, job_id, group_index + 1)
            groups = _groups_by_status(session, job_id)
            if groups.keys() <= job_lifecycle.GROUP_FINISHED:
                # Every page is settled: the job ends with its outcome, even if a cancel came
                # in while its last group ran (there was nothing left to stop).
                complete = True
            elif job.cancel_requested:
                # A group still running elsewhere (groups in parallel) finishes the job when
                # it is recorded, so no page it writes lands after the job's end.
                if not groups.get("running"):
                    finished, delivery_id = True, self._finish_canceled(session, job)
            elif following is not None and following.enqueued_at is None:
                queue_group(self.dispatcher, following, priority=job.priority)
        if complete:
            finished, delivery_id = self._complete(job_id)
        if delivery_id:
            self.dispatcher.enqueue_webhook(delivery_id=delivery_id)
        if finished:
            self.engine.end_document(job_id)

    def _complete(self, job_id: str) -> tuple[bool, str | None]:
        """Every group is settled, so no page changes any more: assemble the document without
        holding the job's row (a searchable PDF of 300 scans takes seconds, and a cancel or a
        poll's writer would wait for it), then mark the job finished under the lock. Two
        workers settling a document's last groups at once may both assemble it: the objects
        are at fixed keys and identical, and only one of them finishes the job."""
        with self.sessions() as session:
            job = session.get(Job, job_id)
            assert job is not None
            if job.deleted_at is None:
                assembly.write_document(
                    self.store,
                    job,
                    status=job_lifecycle.outcome(job),
                    build_pdf=self._pdf_builder(),
                )
        with transaction(self.sessions) as session:
            job = session.get(Job, job_id, with_for_update=True)
            if job is None or job.status in job_lifecycle.TERMINAL:
                return False, None  # the other worker finished it
            # A cancel that came in while the document was assembled is too late: nothing is
            # left to stop, and the job ends with its whole result.
            job_lifecycle.finish(job)
            return True, self._finished(session, job)

    def _finish_canceled(self, session: Session, job: Job) -> str | None:
        """Stopped between groups: the partial result lists the pages never run as canceled."""
        job_lifecycle.finish_canceled(job)
        if job.deleted_at is None:
            assembly.write_document(
                self.store, job, status=job.status, build_pdf=self._pdf_builder()
            )
        return self._finished(session, job)

    def _pdf_builder(self) -> assembly.PdfBuilder | None:
        """The searchable PDF built in a render process when there are some (PyMuPDF holds the
        GIL for the whole build), else here."""
        if self.render_pool is None:
            return None
        return functools.partial(self.render_pool.call, build_in_render_process)

    def _finished(self, session: Session, job: Job) -> str | None:
        log.info("job.finished", job_id=job.id, status=job.status, pages_failed=job.pages_failed)
        if job.deleted_at is not None:
            # Deleted while it ran: whatever this document's workers wrote since goes too (a
            # worker that dies first leaves its objects to the orphan sweep). No webhook.
            self.store.delete(self.store.keys_under(object_keys.job_prefix(job.id)))
            return None
        assembly.write_progress(self.store, job)
        return record_job_finished(session, job, settings=self.settings)


def _flagged(result: PageResult, flags: dict[int, tuple[str, ...]]) -> PageResult:
    """The render's flags (a repaired file) go first in the page's warnings."""
    if not flags.get(result.page):
        return result
    return result.model_copy(update={"warnings": [*flags[result.page], *result.warnings]})


def _ref(page: Page) -> PageRef:
    return PageRef(page.position, page.page_no, page.source_key, page.source_index)


def _lock_group(session: Session, job_id: str, group_index: int) -> PageGroup | None:
    """Callers lock the job row first: one lock order everywhere, so groups of one document
    claimed, recorded and advanced at once by several workers never deadlock, and the page
    counts each recount writes include every group committed before it."""
    return session.scalar(
        select(PageGroup)
        .where(PageGroup.job_id == job_id, PageGroup.group_index == group_index)
        .with_for_update()
    )


def _group_pages(session: Session, group: PageGroup) -> list[Page]:
    """The pages a group outputs (its context pages excluded)."""
    return _pages_between(
        session, group.job_id, group.first_position + group.overlap, group.last_position
    )


def _pages_between(session: Session, job_id: str, first: int, last: int) -> list[Page]:
    return list(
        session.scalars(
            select(Page)
            .where(Page.job_id == job_id, Page.position.between(first, last))
            .order_by(Page.position)
        )
    )


def _recount(session: Session, job: Job) -> None:
    """Counters derived from the page rows, so a redone group never counts a page twice."""
    session.flush()
    pages = session.execute(select(Page.status, Page.warnings).where(Page.job_id == job.id)).all()
    statuses = Counter(status for status, _ in pages)
    job.pages_done = statuses["succeeded"] + statuses["failed"]
    job.pages_failed = statuses["failed"]
    job.pages_flagged = sum(job_lifecycle.is_flagged(*page) for page in pages)


def _ours(status: str, owner: str | None, claimed: ClaimedGroup) -> bool:
    """Whether ``claimed`` may record the group: it still holds the lease, or the lease lapsed
    and nobody claimed the group since."""
    return status == "pending" or owner == claimed.lease_token


def _groups_by_status(session: Session, job_id: str) -> dict[str, int]:
    """How many of the job's groups are in each status (only the statuses some group is in)."""
    rows = session.execute(
        select(PageGroup.status, func.count())
        .where(PageGroup.job_id == job_id)
        .group_by(PageGroup.status)
    )
    return {status: count for status, count in rows.all()}
