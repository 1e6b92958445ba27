"""Per-model-version metrics, computed at scrape time from Postgres and Redis like the rest.

What an operator watches during a canary: for each version, pages/s, failed pages, pages the GPU
engine flagged (token budget cut, repetition loop), page latency, what waits in its queues, and
unfinished jobs whose version is no longer in the settings (they wait for workers nobody runs).
A page counts for its job's version (recorded at submit; a worker runs only its own version).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import String, case, cast, func, select
from sqlalchemy.orm import Session

from ocr_api.deps import AppState
from ocr_api.metrics import LATENCY_BUCKETS, RATE_WINDOW
from uocr_core import model_versions
from uocr_core.contracts import ocr_queues
from uocr_core.db import utcnow
from uocr_core.job_lifecycle import UNFINISHED
from uocr_core.models import Job, Page

# The GPU engine's page flags (ocr_worker/engines/unlimited_ocr/output/page_guard.py: BUDGET_FLAG,
# LOOP_FLAG; the API does not import the worker, a test keeps the names equal).
PAGE_FLAGS = ("token_budget_exhausted", "repetition_loop")
PAGE_OUTCOMES = ("succeeded", "failed")


class VersionCollector(Collector):
    def __init__(self, state: AppState) -> None:
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        configured = model_versions.version_names(self.state.settings)
        with self.state.sessions() as session:
            outcomes = _pages_by_version_and_status(session)
            recent = _recent_pages_by_version(session)
            flags = {flag: _flagged_pages_by_version(session, flag) for flag in PAGE_FLAGS}
            latency = list(session.execute(_latency_by_version()).all())
            unfinished = _unfinished_jobs_by_version(session)
        seen = sorted(set(configured) | {v for v, _ in outcomes} | set(unfinished))
        yield _pages_family(seen, outcomes)
        yield _rate_family(seen, recent)
        yield _flags_family(seen, flags)
        yield _latency_family(latency)
        yield _unfinished_family(seen, unfinished, configured)
        yield self._queue_depth(seen)

    def _queue_depth(self, versions: list[str]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "uocr_version_queue_depth",
            "Page-group messages waiting in each model version's queues",
            labels=["model_version", "queue"],
        )
        for version in versions:
            for queue in ocr_queues(version):
                family.add_metric([version, queue], float(self.state.redis.llen(queue)))
        return family


def _pages_by_version_and_status(session: Session) -> dict[tuple[str, str], int]:
    rows = session.execute(
        select(Job.model_version, Page.status, func.count())
        .select_from(Page)
        .join(Job, Job.id == Page.job_id)
        .where(Page.status.in_(PAGE_OUTCOMES))
        .group_by(Job.model_version, Page.status)
    ).all()
    return {(version, status): count for version, status, count in rows}


def _recent_pages_by_version(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(Job.model_version, func.count())
        .select_from(Page)
        .join(Job, Job.id == Page.job_id)
        .where(Page.finished_at > utcnow() - RATE_WINDOW)
        .group_by(Job.model_version)
    ).all()
    return {version: count for version, count in rows}


def _flagged_pages_by_version(session: Session, flag: str) -> dict[str, int]:
    # warnings is a JSON list of strings: a flag is there when its quoted name is.
    rows = session.execute(
        select(Job.model_version, func.count())
        .select_from(Page)
        .join(Job, Job.id == Page.job_id)
        .where(cast(Page.warnings, String).like(f'%"{flag}"%'))
        .group_by(Job.model_version)
    ).all()
    return {version: count for version, count in rows}


def _unfinished_jobs_by_version(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(Job.model_version, func.count())
        .where(Job.status.in_(UNFINISHED))
        .group_by(Job.model_version)
    ).all()
    return {version: count for version, count in rows}


def _latency_by_version():  # type: ignore[no-untyped-def]
    seconds = Page.duration_ms / 1000.0
    cumulative = [func.sum(case((seconds <= bound, 1), else_=0)) for bound in LATENCY_BUCKETS]
    return (
        select(Job.model_version, func.count(Page.duration_ms), func.sum(seconds), *cumulative)
        .select_from(Page)
        .join(Job, Job.id == Page.job_id)
        .where(Page.duration_ms.is_not(None))
        .group_by(Job.model_version)
    )


def _pages_family(versions: list[str], counts: dict[tuple[str, str], int]) -> GaugeMetricFamily:
    """Every version and outcome, zeros included, so a ratio alert has both series at once."""
    family = GaugeMetricFamily(
        "uocr_version_pages",
        "Pages finished per model version and outcome",
        labels=["model_version", "status"],
    )
    for version in versions:
        for status in PAGE_OUTCOMES:
            family.add_metric([version, status], float(counts.get((version, status), 0)))
    return family


def _rate_family(versions: list[str], recent: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "uocr_version_pages_per_second",
        "Pages finished per second per model version, last minute",
        labels=["model_version"],
    )
    for version in versions:
        family.add_metric([version], recent.get(version, 0) / RATE_WINDOW.total_seconds())
    return family


def _flags_family(versions: list[str], flags: dict[str, dict[str, int]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "uocr_version_page_flags",
        "Pages flagged by the engine (token budget cut, repetition loop) per model version",
        labels=["model_version", "flag"],
    )
    for version in versions:
        for flag, counts in flags.items():
            family.add_metric([version, flag], float(counts.get(version, 0)))
    return family


def _latency_family(rows: list[Any]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "uocr_version_page_latency_seconds",
        "Time to OCR one page, per model version",
        labels=["model_version"],
    )
    for version, count, total, *cumulative in rows:
        buckets = [
            (str(b), float(c or 0)) for b, c in zip(LATENCY_BUCKETS, cumulative, strict=True)
        ]
        buckets.append(("+Inf", float(count or 0)))
        family.add_metric([version], buckets, sum_value=float(total or 0))
    return family


def _unfinished_family(
    versions: list[str], unfinished: dict[str, int], configured: list[str]
) -> GaugeMetricFamily:
    """configured="false": jobs of a version removed from the settings, which no worker of
    this configuration serves; they stay queued for it (list it again to run them)."""
    family = GaugeMetricFamily(
        "uocr_version_unfinished_jobs",
        "Unfinished jobs per model version; configured=false: the version is not in the settings",
        labels=["model_version", "configured"],
    )
    for version in versions:
        known = "true" if version in configured else "false"
        family.add_metric([version, known], float(unfinished.get(version, 0)))
    return family
