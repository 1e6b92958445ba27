"""The upload scan with a real clamd: an infected document is refused on every path it can
enter by, and nothing of it is kept (no job, no object, no broker message); a clean one is
read as usual; with clamd down, uploads are refused (503), never taken unscanned.

Two deployments of their own, both scanning through the module's clamd: ``idle`` has no
worker, so a message queued by mistake would still be waiting in Redis to be seen; ``running``
has one worker on every queue (OCR and control: it also runs the feeder that admits batch
documents). The API runs in-process (TestClient); the workers, clamd and the servers are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.helpers import wait_for
from tests.e2e.processes import Process, celery_worker
from tests.factories import character_error_rate, normalise, sample_pages, scanned_pdf
from tests.own_clamd import REPORTED_SIGNATURE, OwnClamd, eicar
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES, QUEUE_CONTROL
from uocr_core.dispatch import CeleryDispatcher
from uocr_core.jobs.admission_service import admit_waiting
from uocr_core.models import Job
from uocr_core.settings import Settings, UploadScanSettings
from uocr_core.tenants import CreatedKey

pytestmark = pytest.mark.services
INFECTED = "urn:uocr:problem:infected-document"


@pytest.fixture(scope="module")
def clamd() -> Iterator[OwnClamd]:
    daemon = OwnClamd().start()
    yield daemon
    daemon.stop()


def _scanning(deployment: Stack, address: str) -> Stack:
    """The deployment with the scan on: its settings for the in-process API, its env for
    worker processes."""
    scan = UploadScanSettings(clamd_address=address, timeout_seconds=5)
    settings = deployment.settings.model_copy(update={"upload_scan": scan})
    env = {**deployment.env, "UOCR_UPLOAD_SCAN__CLAMD_ADDRESS": address}
    return Stack(settings, env, deployment.sessions, deployment.store)


@pytest.fixture(scope="module")
def idle(stack: Stack, service_urls: ServiceUrls, clamd: OwnClamd) -> Iterator[Stack]:
    with deployment_without_workers(stack, service_urls) as deployment:
        yield _scanning(deployment, clamd.unix_address)


@pytest.fixture(scope="module")
def running(
    stack: Stack,
    service_urls: ServiceUrls,
    clamd: OwnClamd,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    with deployment_without_workers(stack, service_urls) as deployment:
        scanning = _scanning(deployment, clamd.tcp_address)
        logs = tmp_path_factory.mktemp("upload-scan-logs")
        queues = ",".join((*OCR_QUEUES, QUEUE_CONTROL))
        worker: Process = celery_worker(
            scanning.env, logs, name="scan@e2e", queues=queues, beat=False
        ).start()
        try:
            yield scanning
        finally:
            worker.stop()


@contextmanager
def _api(settings: Settings, tenant: CreatedKey) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = f"Bearer {tenant.api_key}"
        yield client


def _infected_pdf() -> bytes:
    """A valid PDF that uocr would read, with the EICAR string after its end."""
    return scanned_pdf(sample_pages(1, lines=2, seed=5)) + eicar()


def _queued_messages(settings: Settings) -> int:
    """Every message waiting in the deployment's broker (Celery's queues are Redis lists)."""
    broker = redis.Redis.from_url(settings.redis.url)
    lists = [key for key in broker.scan_iter() if broker.type(key) == b"list"]
    return sum(int(broker.llen(key)) for key in lists)


def _tenant_objects(deployment: Stack, tenant: CreatedKey) -> list[str]:
    return [k for k in deployment.store.keys_under("") if tenant.tenant_id in k]


def _tenant_jobs(deployment: Stack, tenant: CreatedKey) -> int:
    with deployment.sessions() as session:
        return (
            session.scalar(
                select(func.count()).select_from(Job).where(Job.tenant_id == tenant.tenant_id)
            )
            or 0
        )


def _assert_nothing_kept(deployment: Stack, tenant: CreatedKey, messages_before: int) -> None:
    assert _tenant_jobs(deployment, tenant) == 0
    assert _tenant_objects(deployment, tenant) == []
    assert not [k for k in deployment.store.keys_under("jobs/")]  # no job's input either
    assert _queued_messages(deployment.settings) == messages_before


def _assert_infected(response: Any, name: str) -> None:
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == INFECTED
    assert REPORTED_SIGNATURE in problem["detail"] and name in problem["detail"]


def test_an_infected_pdf_is_refused_with_the_signature_and_nothing_is_kept(idle: Stack) -> None:
    tenant = idle.new_tenant()
    before = _queued_messages(idle.settings)
    with _api(idle.settings, tenant) as client:
        response = client.post("/v1/jobs", files={"file": ("invoice.pdf", _infected_pdf())})
    _assert_infected(response, "invoice.pdf")
    assert response.headers["content-type"] == "application/problem+json"
    _assert_nothing_kept(idle, tenant, before)


def test_an_infected_presigned_upload_is_refused_and_deleted_from_the_inbox(idle: Stack) -> None:
    tenant = idle.new_tenant()
    before = _queued_messages(idle.settings)
    with _api(idle.settings, tenant) as client:
        target = client.post("/v1/uploads", json={"filename": "scan.pdf"}).json()
        put = httpx.put(target["upload_url"], content=eicar(), headers=target["headers"])
        assert put.status_code == 200
        assert _tenant_objects(idle, tenant) == [target["object_key"]]
        response = client.post("/v1/jobs", json={"object_key": target["object_key"]})
    _assert_infected(response, "scan.pdf")
    assert "deleted from your inbox" in response.json()["detail"]
    _assert_nothing_kept(idle, tenant, before)


def test_a_batch_file_part_infected_refuses_every_part(idle: Stack) -> None:
    tenant = idle.new_tenant()
    clean = scanned_pdf(sample_pages(1, lines=2, seed=6))
    with _api(idle.settings, tenant) as client:
        batch = client.post("/v1/batches", json={"open": True}).json()
        before = _queued_messages(idle.settings)  # creating it asked the feeder for a round
        parts = [("file", ("clean.pdf", clean)), ("file", ("bad.pdf", _infected_pdf()))]
        response = client.post(f"/v1/batches/{batch['id']}/files", files=parts)
        documents = client.get(f"/v1/batches/{batch['id']}").json()["documents"]
    _assert_infected(response, "bad.pdf")
    assert documents["total"] == 0
    _assert_nothing_kept(idle, tenant, before)


@pytest.mark.parametrize("over", ["unix", "tcp"])
def test_clamd_down_refuses_uploads_with_503_naming_the_scanner(idle: Stack, over: str) -> None:
    stopped = OwnClamd().start()
    stopped.stop()
    address = stopped.unix_address if over == "unix" else stopped.tcp_address
    down = _scanning(idle, address)
    tenant = idle.new_tenant()
    before = _queued_messages(idle.settings)
    clean = scanned_pdf(sample_pages(1, lines=2, seed=7))
    with _api(down.settings, tenant) as client:
        response = client.post("/v1/jobs", files={"file": ("clean.pdf", clean)})
    assert response.status_code == 503, response.text
    assert response.json()["type"] == "urn:uocr:problem:scanner-unavailable"
    assert f"ClamAV clamd at {address}" in response.json()["detail"]
    assert int(response.headers["Retry-After"]) > 0
    _assert_nothing_kept(idle, tenant, before)


def test_batch_documents_wait_while_clamd_is_down_and_are_read_once_it_is_back(
    idle: Stack, clamd: OwnClamd
) -> None:
    """The feeder's round (run here in-process, as the control worker runs it) stops at the
    first document it cannot scan: the document stays waiting, unread and unfailed."""
    stopped = OwnClamd().start()
    stopped.stop()
    tenant = idle.new_tenant()
    key = f"inbox/{tenant.tenant_id}/waiting.pdf"
    idle.store.put(key, scanned_pdf(sample_pages(2, lines=2, seed=10)))
    with _api(idle.settings, tenant) as client:
        created = client.post("/v1/batches", json={"documents": [{"object_key": key}]})
    assert created.status_code == 201, created.text
    dispatcher = CeleryDispatcher(make_celery(idle.settings), idle.settings.group_time_limit, 1000)

    def feeder_round(deployment: Stack) -> int:
        return admit_waiting(
            sessions=deployment.sessions,
            store=deployment.store,
            dispatcher=dispatcher,
            settings=deployment.settings,
        )

    assert feeder_round(_scanning(idle, stopped.unix_address)) == 0
    with idle.sessions() as session:
        job = session.scalars(select(Job).where(Job.tenant_id == tenant.tenant_id)).one()
        assert (job.status, job.error, job.admitted_at) == ("queued", None, None)
    assert feeder_round(idle) == 1
    with idle.sessions() as session:
        job = session.scalars(select(Job).where(Job.tenant_id == tenant.tenant_id)).one()
        assert job.admitted_at is not None and job.page_count == 2 and job.error is None


def test_a_clean_pdf_is_scanned_accepted_and_read(running: Stack) -> None:
    tenant = running.new_tenant()
    lines = sample_pages(1, lines=3, seed=8)
    with _api(running.settings, tenant) as client:
        accepted = client.post("/v1/jobs", files={"file": ("clean.pdf", scanned_pdf(lines))})
        assert accepted.status_code == 202, accepted.text
        job, _ = wait_for(client, accepted.json()["id"], timeout=120)
        text = client.get(f"/v1/jobs/{job['id']}/result?format=text").text
    assert job["status"] == "succeeded", job
    assert character_error_rate(normalise("\n".join(lines[0])), normalise(text)) < 0.1


def test_an_infected_batch_document_fails_as_its_own_job(running: Stack) -> None:
    """Inbox objects are read (and scanned) when the feeder admits them: the infected one
    fails with the signature and is deleted; its neighbour is read as usual."""
    tenant = running.new_tenant()
    inbox = f"inbox/{tenant.tenant_id}/box-1/"
    running.store.put(inbox + "a.pdf", scanned_pdf(sample_pages(1, lines=2, seed=9)))
    running.store.put(inbox + "b.pdf", _infected_pdf())
    with _api(running.settings, tenant) as client:
        created = client.post("/v1/batches", json={"prefix": inbox})
        assert created.status_code == 201, created.text
        jobs = client.get(f"/v1/batches/{created.json()['id']}/jobs").json()["jobs"]
        by_name = {j["source"]: wait_for(client, j["id"], timeout=120)[0] for j in jobs}
    assert by_name["a.pdf"]["status"] == "succeeded"
    infected = by_name["b.pdf"]
    assert infected["status"] == "failed"
    assert (
        REPORTED_SIGNATURE in infected["error"] and "deleted from your inbox" in infected["error"]
    )
    assert infected["pages_total"] == 0
    assert not running.store.exists(inbox + "b.pdf")
    assert running.store.keys_under(f"jobs/{infected['id']}/") == []


def test_clean_batch_files_are_scanned_stored_and_read(running: Stack) -> None:
    tenant = running.new_tenant()
    with _api(running.settings, tenant) as client:
        batch = client.post("/v1/batches", json={"open": True}).json()
        parts = [("file", ("one.pdf", scanned_pdf(sample_pages(1, lines=2, seed=11))))]
        added = client.post(f"/v1/batches/{batch['id']}/files", files=parts)
        assert added.status_code == 200, added.text
        client.post(f"/v1/batches/{batch['id']}/close")
        job = wait_for(client, added.json()["job_ids"][0], timeout=120)[0]
    assert job["status"] == "succeeded", job
    assert job["pages_total"] == 1
