"""Retention: a finished job's document and results go after result_retention_days; the job's
record stays; nothing younger, nothing unfinished, is touched."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from ocr_worker.upkeep.retention import purge_expired_results
from tests.worker.conftest import ScriptedEngine
from uocr_core import object_keys
from uocr_core.db import transaction, utcnow
from uocr_core.models import Job, Page, PageGroup


def _finish_days_ago(harness, job_id: str, days: float) -> None:  # type: ignore[no-untyped-def]
    with transaction(harness.sessions) as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.finished_at = utcnow() - timedelta(days=days)


def test_expired_jobs_lose_their_objects_and_keep_their_record(harness) -> None:  # type: ignore[no-untyped-def]
    old, recent = harness.submit(2), harness.submit(2)
    harness.drain(ScriptedEngine())
    unfinished = harness.submit(1)  # queued, never run: not finished, never purged
    _finish_days_ago(harness, old, 40)
    _finish_days_ago(harness, recent, 10)
    store = harness.store
    assert store.keys_under(object_keys.job_prefix(old))  # input, pages, results

    purged = purge_expired_results(harness.sessions, store, retention_days=30, batch=1)
    assert purged == [old]
    assert store.keys_under(object_keys.job_prefix(old)) == []
    assert object_keys.result_key(recent, "json") in store.keys_under(
        object_keys.job_prefix(recent)
    )
    assert store.keys_under(object_keys.job_prefix(unfinished))  # its input stays
    job = harness.job(old)
    assert job.status == "succeeded" and job.results_deleted_at is not None
    assert (job.page_count, job.pages_done) == (2, 2)  # the record keeps its counters
    with harness.sessions() as session:  # but not a row a page: the database stops growing
        for table in (Page, PageGroup):
            left = select(func.count()).select_from(table).where(table.job_id.in_([old, recent]))
            kept = session.scalar(left.where(table.job_id == recent))
            assert session.scalar(left) == kept and kept
    assert purge_expired_results(harness.sessions, store, retention_days=30) == []  # done once


def test_one_run_purges_every_expired_job_batch_after_batch(harness) -> None:  # type: ignore[no-untyped-def]
    ids = [harness.submit(1) for _ in range(5)]
    harness.drain(ScriptedEngine())
    for job_id in ids:
        _finish_days_ago(harness, job_id, 31)
    purged = purge_expired_results(harness.sessions, harness.store, retention_days=30, batch=2)
    assert sorted(purged) == sorted(ids)


def test_a_retention_of_zero_keeps_everything(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(1)
    harness.drain(ScriptedEngine())
    _finish_days_ago(harness, job_id, 3650)
    assert purge_expired_results(harness.sessions, harness.store, retention_days=0) == []
    assert harness.store.keys_under(object_keys.job_prefix(job_id))


def test_a_deleted_job_is_not_retentions_and_keeps_its_tombstone(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(1)
    harness.drain(ScriptedEngine())
    harness.delete(job_id)
    _finish_days_ago(harness, job_id, 40)
    assert purge_expired_results(harness.sessions, harness.store, retention_days=30) == []
    job = harness.job(job_id)
    assert job.deleted_at is not None and job.results_deleted_at is None
    assert harness.store.keys_under(object_keys.job_prefix(job_id)) == []
