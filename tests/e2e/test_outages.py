"""The broker, the database and the object store fail mid-document: nothing stuck, nothing lost.

A deployment of its own (its own Redis and Postgres, which these tests kill and restart; the
shared bucket server behind a network gate these tests cut), with the API under uvicorn, an OCR
worker and a control worker running the reconciler on beat. Short grace and lease so each fault
heals in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from celery import Celery
from sqlalchemy import func, select

from tests.conftest import Stack
from tests.e2e.helpers import submit, wait_for
from tests.e2e.own_services import NetworkGate, OwnPostgres, OwnRedis
from tests.e2e.processes import (
    Process,
    api_server,
    celery_worker,
    free_port,
    wait_http,
    wait_until,
)
from tests.factories import sample_pages, scanned_pdf
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.models import Job, Page, PageGroup
from uocr_core.settings import load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import CreatedKey, create_key

FAST_RECOVERY_ENV = {
    "UOCR_WORKER__REDISPATCH_AFTER_SECONDS": "3",
    "UOCR_WORKER__RECONCILE_INTERVAL_SECONDS": "1",
    "UOCR_WORKER__TRANSIENT_RETRY_MAX_SECONDS": "4",
}
OCR_WORKER = "ocr-outage@e2e"


@dataclass
class Outages:
    redis: OwnRedis
    postgres: OwnPostgres
    s3: NetworkGate
    env: dict[str, str]
    logs: Path
    api_url: str
    ocr_worker: Process
    tenant: CreatedKey

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tenant.api_key}"}
        return httpx.Client(base_url=self.api_url, timeout=30, headers=headers)

    def start_ocr_worker(self) -> None:
        self.ocr_worker = _ocr_worker(self.env, self.logs)

    def stop_ocr_worker(self) -> None:
        self.ocr_worker.stop()


def _ocr_worker(env: dict[str, str], logs: Path) -> Process:
    worker = celery_worker(
        env, logs, name=OCR_WORKER, queues=",".join(OCR_QUEUES), beat=False
    ).start()
    app = make_celery(load_settings())
    wait_until(lambda: _answers(app), 60, what="the OCR worker to answer a ping")
    return worker


def _answers(app: Celery) -> bool:
    try:
        return bool(app.control.ping(destination=[OCR_WORKER], timeout=0.5))
    except (redis.RedisError, OSError):  # a pooled connection from before a Redis restart
        return False


@pytest.fixture(scope="module")
def outages(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outages]:
    logs = tmp_path_factory.mktemp("outage-logs")
    redis, postgres = OwnRedis().start(), OwnPostgres().init()
    s3 = NetworkGate(int(stack.env["UOCR_S3__ENDPOINT_URL"].rsplit(":", 1)[1])).open()
    bucket = f"uocr-outage-{uuid.uuid4().hex[:8]}"
    env = {
        **stack.env,
        **FAST_RECOVERY_ENV,
        "UOCR_DATABASE__URL": postgres.url,
        "UOCR_REDIS__URL": redis.url,
        "UOCR_S3__ENDPOINT_URL": s3.url,
        "UOCR_S3__BUCKET": bucket,
    }
    saved = {name: stack.env.get(name) for name in env}
    os.environ.update(env)  # load_settings() in this process reads the same deployment
    S3ObjectStore(load_settings().s3).ensure_bucket()
    with transaction(make_session_factory(make_engine(load_settings().database))) as session:
        tenant = create_key(session, tenant_name="outages")
    api_port = free_port()
    control_env = {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"}
    control = celery_worker(
        control_env, logs, name="control-outage@e2e", queues="control", beat=True
    )
    processes = [control.start(), api_server(env, logs, api_port).start()]
    outages = Outages(
        redis,
        postgres,
        s3,
        env,
        logs,
        f"http://127.0.0.1:{api_port}",
        _ocr_worker(env, logs),
        tenant,
    )
    try:
        wait_http(f"{outages.api_url}/healthz")
        yield outages
    finally:
        for process in [outages.ocr_worker, *processes]:
            process.stop()
        redis.kill()
        postgres.destroy()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        print(f"outage logs in {logs}")


def _sessions():  # type: ignore[no-untyped-def]
    return make_session_factory(make_engine(load_settings().database))


def _assert_every_page_once(client: httpx.Client, job: dict, pages: int) -> None:  # type: ignore[type-arg]
    assert job["status"] == "succeeded", job
    assert [p["page"] for p in job["pages"]] == list(range(1, pages + 1))
    assert all(p["status"] == "succeeded" for p in job["pages"]), job["pages"]
    link = client.get(f"/v1/jobs/{job['id']}/result/link", params={"format": "jsonl"}).json()
    lines = [json.loads(line) for line in httpx.get(link["url"]).text.splitlines()]
    assert [line["page"] for line in lines] == list(range(1, pages + 1))


def _nothing_left_pending() -> None:
    with _sessions()() as session:
        unfinished = session.scalar(
            select(func.count()).select_from(Job).where(Job.status.in_(("queued", "running")))
        )
        pending = session.scalar(
            select(func.count())
            .select_from(PageGroup)
            .where(PageGroup.status.in_(("pending", "running")))
        )
    assert (unfinished, pending) == (0, 0)


def _first_page_done(client: httpx.Client, job_id: str) -> bool:
    pages = client.get(f"/v1/jobs/{job_id}").json()["pages"]
    return any(p["status"] == "succeeded" for p in pages)


def test_redis_killed_and_restarted_mid_document_loses_no_job(outages: Outages) -> None:
    with outages.client() as client:
        ids = [submit(client, scanned_pdf(sample_pages(7, lines=3))).json()["id"] for _ in range(2)]
        wait_until(lambda: _first_page_done(client, ids[0]), 120, what="a first page")
        outages.redis.kill()  # every queued message is gone with it
        time.sleep(3)
        outages.redis.start()
        for job_id in ids:
            job, _ = wait_for(client, job_id, timeout=180)
            _assert_every_page_once(client, job, 7)
    _nothing_left_pending()


def test_postgres_stopped_mid_document_answers_503_and_every_job_completes(
    outages: Outages,
) -> None:
    with outages.client() as client:
        ids = [submit(client, scanned_pdf(sample_pages(7, lines=3))).json()["id"] for _ in range(2)]
        wait_until(lambda: _first_page_done(client, ids[0]), 120, what="a first page")
        outages.postgres.stop()
        try:
            down = client.get(f"/v1/jobs/{ids[0]}")
            assert down.status_code == 503, down.text
            assert int(down.headers["Retry-After"]) > 0
            refused = submit(client, scanned_pdf(sample_pages(1)))
            assert refused.status_code == 503 and "Retry-After" in refused.headers
            time.sleep(8)  # longer than the lease: renewals fail, tasks fail and retry
        finally:
            outages.postgres.start()
        # The same keep-alive connection, no restart: the pool's pre-ping replaced its sockets.
        assert client.get(f"/v1/jobs/{ids[0]}").status_code == 200
        for job_id in ids:
            job, _ = wait_for(client, job_id, timeout=180)
            _assert_every_page_once(client, job, 7)
    _nothing_left_pending()


def test_the_object_store_cut_mid_document_answers_503_and_every_job_completes(
    outages: Outages,
) -> None:
    """Groups in flight fail over as a dependency being down, not as bad documents: none uses
    up its attempts, no page fails, and the submit refused meanwhile leaves no job behind."""
    with outages.client() as client:
        ids = [submit(client, scanned_pdf(sample_pages(7, lines=3))).json()["id"] for _ in range(2)]
        wait_until(lambda: _first_page_done(client, ids[0]), 120, what="a first page")
        with _sessions()() as session:
            jobs_before = session.scalar(select(func.count()).select_from(Job))
        outages.s3.cut()
        try:
            refused = submit(client, scanned_pdf(sample_pages(1)))
            assert refused.status_code == 503, refused.text
            assert int(refused.headers["Retry-After"]) > 0
            time.sleep(10)  # past botocore's own retries: groups in flight fail and retry
        finally:
            outages.s3.open()
        with _sessions()() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == jobs_before
        for job_id in ids:
            job, _ = wait_for(client, job_id, timeout=180)
            _assert_every_page_once(client, job, 7)
    _nothing_left_pending()
    log = outages.ocr_worker.log_tail(10**7)
    assert "StorageUnavailable" in log  # the cut reached the worker mid-document
    with _sessions()() as session:
        attempts = session.scalars(select(PageGroup.attempts).where(PageGroup.job_id.in_(ids)))
        assert set(attempts) == {1}  # given back, not counted: each group ran to its end once


def test_a_submit_while_the_broker_is_down_leaves_nothing_behind(outages: Outages) -> None:
    store = S3ObjectStore(load_settings().s3)
    with _sessions()() as session:
        jobs_before = session.scalar(select(func.count()).select_from(Job))
    objects_before = set(store.keys_under("jobs/"))
    with outages.client() as client:
        outages.redis.kill()
        try:
            refused = submit(client, scanned_pdf(sample_pages(2)))
        finally:
            outages.redis.start()
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) > 0
        with _sessions()() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == jobs_before
        assert set(store.keys_under("jobs/")) == objects_before
        # The broker is back: the next submit goes through without restarting anything.
        accepted = submit(client, scanned_pdf(sample_pages(2)))
        assert accepted.status_code == 202, accepted.text
        job, _ = wait_for(client, accepted.json()["id"], timeout=120)
        _assert_every_page_once(client, job, 2)


_TAKE_AND_HOLD = """
import sys, time
from kombu import Connection, Queue
with Connection(sys.argv[1]) as conn:
    message = conn.SimpleQueue(Queue("ocr.backlog", routing_key="ocr.backlog")).get(timeout=30)
    print("taken", message.headers["id"], flush=True)
    time.sleep(600)  # never acked: killed here, as a worker that died before claiming
"""


def test_a_worker_killed_after_taking_a_task_before_claiming_it_stalls_nothing(
    outages: Outages,
) -> None:
    settings = load_settings()
    visibility = settings.max_group_time_limit * 2 + 60
    outages.stop_ocr_worker()
    with outages.client() as client:
        job_id = submit(client, scanned_pdf(sample_pages(2))).json()["id"]
        taker = subprocess.Popen(
            [sys.executable, "-c", _TAKE_AND_HOLD, outages.redis.url],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert taker.stdout is not None and taker.stdout.readline().startswith("taken")
        killed_at = time.monotonic()
        taker.send_signal(signal.SIGKILL)
        taker.wait(10)
        outages.start_ocr_worker()
        job, _ = wait_for(client, job_id, timeout=120)
        recovered_in = time.monotonic() - killed_at
        _assert_every_page_once(client, job, 2)
    assert recovered_in < 60 < visibility, (recovered_in, visibility)
    with _sessions()() as session:
        attempts = session.scalars(select(Page.attempts).where(Page.job_id == job_id)).all()
    assert list(attempts) == [1, 1]  # claimed once: the lost delivery never claimed
