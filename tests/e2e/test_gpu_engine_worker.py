"""Jobs end to end through `uocr worker --gpus all` running the GPU engine class (on CPU here,
two cards faked through configuration) with the tiny checkpoint, loaded by the real loader."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient

from ocr_api.main import create_app
from ocr_worker.engines.engine_process import PROCESS_NAME
from ocr_worker.engines.unlimited_ocr.model.manifest import write_manifest
from tests.conftest import (
    TEST_SETTINGS_ENV,
    ServiceUrls,
    Stack,
    create_database,
    drop_database,
    fresh_redis_url,
)
from tests.e2e.helpers import wait_for
from tests.e2e.processes import Process, wait_until
from tests.factories import sample_pages, scanned_pdf
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint
from uocr_core.celery_app import make_celery
from uocr_core.db import make_engine, make_session_factory
from uocr_core.settings import load_settings
from uocr_core.storage import S3ObjectStore


@pytest.mark.parametrize("engine_process", [False, True], ids=["in-worker", "engine-process"])
def test_documents_run_through_the_gpu_engine_worker(
    service_urls: ServiceUrls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_process: bool
) -> None:
    """Also with the engine in a child process of each worker (``unlimited_ocr.engine_process``):
    the model, vision tower and decode loop there, Celery and storage in the worker."""
    tag = "gpu" + uuid.uuid4().hex[:8]
    checkpoint = write_tiny_checkpoint(tmp_path / "tiny")
    write_manifest(checkpoint)
    env = {
        **TEST_SETTINGS_ENV,
        "UOCR_ENGINE": "unlimited_ocr",
        "UOCR_MODEL_PATH": str(checkpoint),
        "UOCR_MAX_CONCURRENCY": "4",
        "UOCR_VISUAL_CACHE_WORKSPACE_GB": "0.001",
        "UOCR_UNLIMITED_OCR__MAX_TOKENS_PER_PAGE": "6",
        "UOCR_UNLIMITED_OCR__BLOCK_SIZE": "4",
        "UOCR_DATABASE__URL": create_database(service_urls.database_admin, tag),
        "UOCR_REDIS__URL": fresh_redis_url(service_urls),
        "UOCR_S3__ENDPOINT_URL": service_urls.s3,
        "UOCR_S3__BUCKET": tag,
        "UOCR_GPU_COUNT": "2",
        "UOCR_UNLIMITED_OCR__ENGINE_PROCESS": str(engine_process).lower(),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    S3ObjectStore(settings.s3).ensure_bucket()
    make_celery(settings).connection_for_write().default_channel.client.flushdb()
    launcher = Process(
        [str(Path(sys.executable).with_name("uocr")), "worker", "--gpus", "all"],
        env,
        tmp_path / "gpu-worker.log",
    ).start()
    sessions = make_session_factory(make_engine(settings.database))
    try:
        app = make_celery(settings)
        nodes = [f"gpu{card}@{os.uname().nodename}" for card in (0, 1)]  # one per card
        wait_until(
            lambda: len(app.control.ping(destination=nodes, timeout=0.5)) == 2,
            120,
            what=f"{nodes} to answer",
        )
        tenant = Stack(settings, env, sessions, S3ObjectStore(settings.s3)).new_tenant()
        with TestClient(create_app(settings)) as client:
            client.headers["Authorization"] = f"Bearer {tenant.api_key}"
            ids = [
                client.post(
                    "/v1/jobs",
                    files={"file": (f"d{n}.pdf", scanned_pdf(sample_pages(5, lines=2), seed=n))},
                ).json()["id"]
                for n in range(2)
            ]
            for job_id in ids:
                _assert_read_whole(client, job_id)
            if engine_process:  # an engine child killed (CUDA fault, OOM killer): the same
                children = _engine_children(_pid(launcher))  # workers read the next documents
                assert len(children) == 2
                for child in children:
                    child.kill()
                psutil.wait_procs(children, timeout=10)
                ids = [
                    client.post(
                        "/v1/jobs",
                        files={"file": (f"e{n}.pdf", scanned_pdf(sample_pages(5), seed=n))},
                    ).json()["id"]
                    for n in range(4)
                ]
                for job_id in ids:
                    _assert_read_whole(client, job_id)
                assert len(_engine_children(_pid(launcher))) == 2
        log = (tmp_path / "gpu-worker.log").read_text()
        if engine_process:
            assert log.count("engine_process.restarted") == 2, log[-3000:]
        for event in ("engine.weights_loaded", "engine.workspace_initialised", "engine.ready"):
            assert event in log
        assert '"CUDA_VISIBLE_DEVICES"' not in log  # pinning happens in the environment
    finally:
        launcher.stop()
        sessions.kw["bind"].dispose()
        drop_database(service_urls.database_admin, tag)


def _assert_read_whole(client: TestClient, job_id: str) -> None:
    job, _ = wait_for(client, job_id, timeout=120)
    assert job["status"] == "succeeded", job
    assert job["engine"] == "unlimited_ocr" and job["groups_total"] == 2
    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert [p["page"] for p in result["pages"]] == [1, 2, 3, 4, 5]
    assert all(p["engine"] == "unlimited_ocr" for p in result["pages"])


def _engine_children(launcher_pid: int) -> list[psutil.Process]:
    """The engine processes under ``uocr worker``, by the name they give themselves."""
    return [
        child
        for child in psutil.Process(launcher_pid).children(recursive=True)
        if _name(child) == PROCESS_NAME
    ]


def _name(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return process.name()
    return ""


def _pid(process: Process) -> int:
    assert process.popen is not None
    return process.popen.pid
