"""Every statement the service runs on its hot paths (submit, dispatch, claim, record, advance,
settle, status, list, batch status, the feeder, the reconciler, retention) finds its rows by an
index on a database that already holds 10^5 page rows of finished jobs: none reads a whole big
table, whose time would grow with the deployment's history (bench/service/scale_bench.py
measures it at 10^7; docs/scaling.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pymupdf
from sqlalchemy import event, select

from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.simulated import SimulatedEngine
from ocr_worker.pipeline import PageGroupPipeline
from ocr_worker.upkeep.reconciler import Reconciler
from ocr_worker.upkeep.retention import purge_expired_results
from tests import scale_fill
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from uocr_core import audit
from uocr_core.batches.progress import batch_public
from uocr_core.db import make_engine, make_session_factory
from uocr_core.jobs import listing, page_listing
from uocr_core.jobs.admission_service import admit_waiting
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.models import Batch, Job
from uocr_core.settings import SimulatedEngineSettings

PAGE_ROWS = 100_000
BIG = {"jobs", "pages", "page_groups", "webhook_deliveries", "webhook_attempts"}


class NothingWaiting:
    def task_ids(self) -> set[str]:
        return set()


def _pdf(pages: int) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page(width=200, height=200).insert_text((20, 40), f"page {n + 1}")
    return doc.tobytes()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_no_hot_statement_reads_a_whole_big_table(stack: Stack, service_urls: ServiceUrls) -> None:
    with deployment_without_workers(stack, service_urls) as idle:
        tenants = [idle.new_tenant(), idle.new_tenant()]
        filled = scale_fill.fill(
            idle.settings.database.url, PAGE_ROWS, [t.tenant_id for t in tenants]
        )
        assert filled["pages"] >= PAGE_ROWS
        engine = make_engine(idle.settings.database)
        sessions = make_session_factory(engine)
        statements: dict[str, Any] = {}

        @event.listens_for(engine, "before_cursor_execute")
        def seen(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if not executemany and statement.lstrip().upper().startswith(
                ("SELECT", "UPDATE", "DELETE")
            ):
                statements.setdefault(statement, parameters)

        settings, store, dispatcher = idle.settings, idle.store, InlineDispatcher()
        tenant = tenants[1].tenant_id
        job_id = submit_job(
            sessions=sessions,
            store=store,
            dispatcher=dispatcher,
            settings=settings,
            tenant_id=tenant,
            files=[UploadedFile("d.pdf", _pdf(9))],
            options=JobOptions(),
            actor=audit.OPERATOR,
        ).job.id
        pipeline = PageGroupPipeline(
            sessions=sessions,
            store=store,
            engine=SimulatedEngine(SimulatedEngineSettings(seconds_per_page=0, tokens_per_page=20)),
            dispatcher=dispatcher,
            settings=settings,
            worker_id="plans",
        )
        while dispatcher.groups:
            pipeline.run(*dispatcher.groups.popleft())
        with sessions() as session:
            job = session.get_one(Job, job_id)
            assert job.status == "succeeded"
            page_listing.listed_pages(session, job, None, inline_max=300)
            page_listing.listed_pages(session, job, (1, 3), inline_max=300)
            listing.list_jobs(session, tenant_id=tenant, limit=20)
            listing.list_jobs(session, tenant_id=tenants[0].tenant_id, status="succeeded")
            batch = session.scalars(select(Batch).limit(1)).one()
            batch_public(session, batch, settings)
        admit_waiting(sessions=sessions, store=store, dispatcher=dispatcher, settings=settings)
        Reconciler(
            sessions,
            dispatcher,
            NothingWaiting(),
            redispatch_after_seconds=60,
            parallel_groups=True,
        ).run()
        purge_expired_results(sessions, store, retention_days=30)

        scans = []
        with engine.connect() as connection:
            cursor = connection.connection.cursor()
            for statement, parameters in statements.items():
                cursor.execute("EXPLAIN (FORMAT JSON) " + statement, parameters)
                row = cursor.fetchone()
                assert row is not None
                plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
                for node in _nodes(plan[0]["Plan"]):
                    if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in BIG:
                        scans.append(
                            f"{node['Relation Name']}: {' '.join(statement.split())[:300]}"
                        )
        engine.dispose()
        assert len(statements) > 20  # every path above ran its statements
        assert scans == [], "\n".join(scans)
