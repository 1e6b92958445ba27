"""Prometheus metrics computed at scrape time from Postgres and Redis, the records of truth.

Worker processes come and go; reading the database at scrape keeps every API replica's numbers
identical and survives restarts, at the cost of a few indexed queries per scrape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select

from ocr_api.deps import AppState
from uocr_core.contracts import OCR_QUEUES, QUEUE_CONTROL
from uocr_core.db import utcnow
from uocr_core.job_lifecycle import CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED
from uocr_core.models import Job, Page

LATENCY_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300)
JOB_STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELED)
PAGE_STATUSES = ("pending", RUNNING, SUCCEEDED, FAILED, CANCELED)
RATE_WINDOW = timedelta(minutes=1)


class ServiceCollector(Collector):
    def __init__(self, state: AppState) -> None:
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        with self.state.sessions() as session:
            jobs = session.execute(select(Job.status, func.count()).group_by(Job.status)).all()
            pages = session.execute(select(Page.status, func.count()).group_by(Page.status)).all()
            recent = session.scalar(
                select(func.count()).where(Page.finished_at > utcnow() - RATE_WINDOW)
            )
            latency = session.execute(_latency_query()).one()
        yield _by_status("uocr_jobs", "Jobs by status", JOB_STATUSES, jobs)
        yield _by_status("uocr_pages", "Pages by status", PAGE_STATUSES, pages)
        rate = GaugeMetricFamily("uocr_pages_per_second", "Pages finished per second, last minute")
        rate.add_metric([], (recent or 0) / RATE_WINDOW.total_seconds())
        yield rate
        yield _latency_histogram(latency)
        depth = GaugeMetricFamily(
            "uocr_queue_depth", "Messages waiting per queue", labels=["queue"]
        )
        for queue in (*OCR_QUEUES, QUEUE_CONTROL):
            depth.add_metric([queue], float(self.state.redis.llen(queue)))
        yield depth


def _by_status(
    name: str, doc: str, statuses: Sequence[str], rows: Sequence[Any]
) -> GaugeMetricFamily:
    """Every status, zeros included: an alert on increase() or a ratio needs the series to
    exist before its first failure, not appear with it."""
    counts = dict.fromkeys(statuses, 0) | {status: count for status, count in rows}
    family = GaugeMetricFamily(name, doc, labels=["status"])
    for status, count in counts.items():
        family.add_metric([status], float(count))
    return family


def _latency_query():  # type: ignore[no-untyped-def]
    seconds = Page.duration_ms / 1000.0
    cumulative = [func.sum(case((seconds <= bound, 1), else_=0)) for bound in LATENCY_BUCKETS]
    return select(func.count(Page.duration_ms), func.sum(seconds), *cumulative).where(
        Page.duration_ms.is_not(None)
    )


def _latency_histogram(row) -> HistogramMetricFamily:  # type: ignore[no-untyped-def]
    count, total, *cumulative = row
    buckets = [(str(b), float(c or 0)) for b, c in zip(LATENCY_BUCKETS, cumulative, strict=True)]
    buckets.append(("+Inf", float(count or 0)))
    family = HistogramMetricFamily("uocr_page_latency_seconds", "Time to OCR one page")
    family.add_metric([], buckets, sum_value=float(total or 0))
    return family
