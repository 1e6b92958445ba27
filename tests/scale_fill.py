"""A deployment's history for scale runs (bench/service/scale_bench.py) and the plans test
(tests/e2e/test_plans_at_scale.py): N page rows of finished jobs, as a deployment that has run
for two months holds them, written with COPY (psycopg) into a migrated database.

The mix: ~90% of jobs succeeded, ~6% failed, ~4% canceled; 1 to 200 pages a job (~19 on
average); pages failed or flagged on a few percent; page groups of 8 pages with overlap 1 (the
service's plan); a fifth of the jobs with a webhook delivered (a few dead-lettered); most backlog
jobs in batches. Jobs older than the 30-day retention have ``results_deleted_at`` set, as the
purge would have left them. No object is written to the bucket: nothing in the bench's workload
reads a finished job's objects (the hourly sweeps are not run on them).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg

from uocr_core.page_groups import PageGroupPlanner

BIG_TABLES = (
    "batches",
    "jobs",
    "pages",
    "page_groups",
    "webhook_deliveries",
    "webhook_attempts",
    "page_texts",  # filled by bench/service/search_bench.py, after
)
# Page counts of a real intake: many short letters and forms, some files, a few long volumes.
PAGE_COUNTS = ((1, 1, 25), (2, 5, 25), (6, 20, 25), (21, 60, 20), (61, 200, 5))
RETENTION = timedelta(days=30)
HISTORY = timedelta(days=60)
PLANNER = PageGroupPlanner(size=8, overlap=1)
BATCH_JOBS = 400  # documents a historic batch holds


@dataclass
class FilledJob:
    id: str
    tenant: str
    status: str
    priority: str
    pages: int
    done: int  # pages settled (succeeded or failed); fewer than pages only when canceled
    failed: set[int]  # positions
    flagged: set[int]
    created: datetime
    finished: datetime
    batch: str | None
    webhook: bool


def fill(url: str, pages: int, tenants: list[str], seed: int = 7) -> dict[str, int]:
    """COPY ``pages`` page rows (and their jobs, groups, batches and deliveries) spread over
    ``tenants`` (the first holds ~40%, the second ~15%), then VACUUM ANALYZE; returns the rows
    written per table."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    jobs, batches = _plan(rng, pages, tenants, now)
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        # Truncated in this transaction, so COPY FREEZE writes the rows frozen and visible
        # (no vacuum pass owed); the plain indexes are built once after, sorted, not row by row.
        conn.execute(f"TRUNCATE {', '.join(BIG_TABLES)}")
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "AND tablename = ANY(%s) AND indexname LIKE 'ix\\_%%'",
            [list(BIG_TABLES)],
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f"DROP INDEX {name}")
        conn.execute("SET maintenance_work_mem = '1GB'")
        counts = {
            "batches": _copy(conn, "batches", BATCH_COLUMNS, _batch_rows(batches, now)),
            "jobs": _copy(conn, "jobs", JOB_COLUMNS, _job_rows(jobs, now)),
            "pages": _copy(conn, "pages", PAGE_COLUMNS, _page_rows(jobs)),
            "page_groups": _copy(conn, "page_groups", GROUP_COLUMNS, _group_rows(jobs)),
            "webhook_deliveries": _copy(
                conn, "webhook_deliveries", DELIVERY_COLUMNS, _delivery_rows(jobs)
            ),
            "webhook_attempts": _copy(
                conn, "webhook_attempts", ATTEMPT_COLUMNS, _attempt_rows(jobs)
            ),
        }
        for _, definition in indexes:
            conn.execute(definition)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"VACUUM (ANALYZE) {', '.join(BIG_TABLES)}")
    return counts


def _plan(
    rng: random.Random, pages: int, tenants: list[str], now: datetime
) -> tuple[list[FilledJob], dict[str, tuple[str, datetime]]]:
    """The jobs (oldest first) and their batches, until ``pages`` page rows."""
    weights = [40, 15] + [45 / max(1, len(tenants) - 2)] * (len(tenants) - 2)
    jobs: list[FilledJob] = []
    batches: dict[str, tuple[str, datetime]] = {}
    open_batch: dict[str, tuple[str, int]] = {}
    total = 0
    started = now - HISTORY
    step = HISTORY / max(1, pages // 19)
    while total < pages:
        low, high, _ = rng.choices(PAGE_COUNTS, weights=[w for *_, w in PAGE_COUNTS])[0]
        count = min(rng.randint(low, high), pages - total)
        tenant = rng.choices(tenants, weights=weights)[0]
        created = started + step * len(jobs)
        priority = "interactive" if rng.random() < 0.2 else "backlog"
        batch = None
        if priority == "backlog" and rng.random() < 0.7:
            batch, held = open_batch.get(tenant, ("", BATCH_JOBS))
            if held >= BATCH_JOBS:
                batch, held = str(uuid.UUID(int=rng.getrandbits(128))), 0
                batches[batch] = (tenant, created)
            open_batch[tenant] = (batch, held + 1)
        roll = rng.random()
        status = "succeeded" if roll < 0.90 else "failed" if roll < 0.96 else "canceled"
        done = count if status != "canceled" else rng.randint(0, count - 1)
        failed = set(range(count)) if status == "failed" else _few(rng, done, 0.02)
        if status == "succeeded" and len(failed) == count:
            failed = set()  # a job with no page read failed; this one is a success
        flagged = _few(rng, done, 0.03) - failed
        finished = created + timedelta(seconds=5 + 0.6 * count)
        job_id = str(uuid.UUID(int=rng.getrandbits(128)))
        webhook = rng.random() < 0.2
        jobs.append(
            FilledJob(
                job_id,
                tenant,
                status,
                priority,
                count,
                done,
                failed,
                flagged,
                created,
                finished,
                batch,
                webhook,
            )
        )
        total += count
    return jobs, batches


def _few(rng: random.Random, n: int, share: float) -> set[int]:
    return {i for i in range(n) if rng.random() < share}


def _copy(conn: psycopg.Connection, table: str, columns: str, rows: Iterator[str]) -> int:
    """Stream ``rows`` (COPY text lines) into ``table``; returns how many."""
    written = 0
    with conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN WITH (FREEZE)") as copy:
        chunk: list[str] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == 20_000:
                copy.write("".join(chunk))
                written += len(chunk)
                chunk.clear()
        copy.write("".join(chunk))
        written += len(chunk)
    return written


def _line(*values: object) -> str:
    return "\t".join(r"\N" if v is None else str(v) for v in values) + "\n"


BATCH_COLUMNS = (
    "id, tenant_id, name, status, priority, metadata, created_at, closed_at, finished_at"
)


def _batch_rows(batches: dict[str, tuple[str, datetime]], now: datetime) -> Iterator[str]:
    for batch_id, (tenant, created) in batches.items():
        done = min(now, created + timedelta(hours=6))
        yield _line(
            batch_id,
            tenant,
            f"box-{batch_id[:8]}",
            "succeeded",
            "backlog",
            "{}",
            created,
            created,
            done,
        )


JOB_COLUMNS = (
    "id, tenant_id, status, priority, engine, model_version, idempotency_key, "
    "request_fingerprint, source_name, webhook_url, metadata, page_count, pages_done, "
    "pages_failed, pages_flagged, cancel_requested, error, created_at, started_at, finished_at, "
    "batch_id, content_digest, admitted_at, input_key, reuse_results, results_deleted_at, "
    "deleted_at, deleted_by"
)


def _job_rows(jobs: list[FilledJob], now: datetime) -> Iterator[str]:
    for n, job in enumerate(jobs):
        digest = hashlib.sha256(job.id.encode()).hexdigest()
        key = f"uocr-{digest[:40]}" if job.batch else None
        # A day's margin: no job crosses the 30 days while the bench runs (the purge it calls
        # once would then delete objects that were never written).
        expired = job.finished + RETENTION - timedelta(days=1) < now
        deleted = n % 200 == 199  # a client's DELETE: the row stays as a tombstone
        error = {"failed": "every page failed", "canceled": None}.get(job.status)
        yield _line(
            job.id,
            job.tenant,
            job.status,
            job.priority,
            "unlimited_ocr",
            "default",
            key,
            digest if key else None,
            f"scan-{n:08d}.pdf",
            "https://hooks.example.org/uocr" if job.webhook else None,
            '{"box": "A-17"}',
            job.pages,
            job.done,
            len(job.failed),
            len(job.flagged),
            "t" if job.status == "canceled" else "f",
            error,
            job.created,
            job.created + timedelta(seconds=2),
            job.finished,
            job.batch,
            digest,
            job.created + timedelta(seconds=1),
            f"inbox/{job.tenant}/box/{n:08d}.pdf" if job.batch else None,
            "f",
            min(now, job.finished + RETENTION) if expired else None,
            job.finished if deleted else None,
            "tenant:app" if deleted else None,
        )


PAGE_COLUMNS = (
    "job_id, position, page_no, source_key, source_index, status, attempts, result_key, error, "
    "warnings, started_at, finished_at, duration_ms, model_version, engine"
)


def _page_rows(jobs: list[FilledJob]) -> Iterator[str]:
    for job in jobs:
        source = f"jobs/{job.id}/input/000.pdf"
        for position in range(job.pages):
            settled = position < job.done
            status = "failed" if position in job.failed else "succeeded" if settled else "canceled"
            warnings = '["repetition_loop"]' if position in job.flagged else "[]"
            finished = job.created + timedelta(seconds=3 + 0.6 * position) if settled else None
            yield _line(
                job.id,
                position,
                position + 1,
                source,
                position,
                status,
                1 if settled else 0,
                f"jobs/{job.id}/pages/{position + 1:05d}.json" if settled else None,
                "render failed: broken image stream" if status == "failed" else None,
                warnings,
                job.created + timedelta(seconds=2) if settled else None,
                finished,
                600 if settled else None,
                "default" if settled else None,
                "unlimited_ocr" if settled else None,
            )


GROUP_COLUMNS = (
    "job_id, group_index, first_position, last_position, overlap, status, attempts, task_id, "
    "enqueued_at, started_at, finished_at"
)


def _group_rows(jobs: list[FilledJob]) -> Iterator[str]:
    for job in jobs:
        for group in PLANNER.plan(job.pages):
            ran = group.first_position + group.overlap < job.done
            status = ("failed" if job.status == "failed" else "done") if ran else "canceled"
            at = job.created + timedelta(seconds=2 + 0.6 * group.first_position)
            yield _line(
                job.id,
                group.group_index,
                group.first_position,
                group.last_position,
                group.overlap,
                status,
                1 if ran else 0,
                uuid.uuid4().hex if ran else None,
                at if ran else None,
                at if ran else None,
                at + timedelta(seconds=5) if ran else None,
            )


DELIVERY_COLUMNS = "id, job_id, event_type, url, body, status, attempts, created_at, delivered_at"
BODY = '{"event": "job.%s", "job": {"id": "%s", "status": "%s", "pages": %d}}'


def _deliveries(jobs: list[FilledJob]) -> Iterator[tuple[str, FilledJob, str]]:
    for n, job in enumerate(j for j in jobs if j.webhook):
        yield (
            str(uuid.uuid5(uuid.NAMESPACE_URL, job.id)),
            job,
            "failed" if n % 50 == 0 else "delivered",
        )


def _delivery_rows(jobs: list[FilledJob]) -> Iterator[str]:
    for delivery_id, job, status in _deliveries(jobs):
        body = BODY % (job.status, job.id, job.status, job.pages)
        delivered = job.finished + timedelta(seconds=1) if status == "delivered" else None
        yield _line(
            delivery_id,
            job.id,
            f"job.{job.status}",
            "https://hooks.example.org/uocr",
            body,
            status,
            1 if delivered else 8,
            job.finished,
            delivered,
        )


ATTEMPT_COLUMNS = "delivery_id, attempt_no, started_at, status_code, error, duration_ms"


def _attempt_rows(jobs: list[FilledJob]) -> Iterator[str]:
    for delivery_id, job, status in _deliveries(jobs):
        code = 200 if status == "delivered" else 503
        yield _line(delivery_id, 1, job.finished, code, None, 120)
