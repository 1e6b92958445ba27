"""Canary and rollback with real processes: two CPU model versions, v1 (stable) and v2 (canary),
each served by its own `uocr worker --model-version` process. A canary tenant's jobs are read by
v2's worker and say so on every page; promoting v2 (the API restarted with new settings) sends
new jobs to v2 while a job already queued on v1 waits for v1's worker and finishes there, every
page exactly once."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import (
    FLOWER_PASSWORD,
    FLOWER_USER,
    UOCR_ARGV,
    Process,
    api_server,
    flower,
    free_port,
    wait_http,
    wait_until,
)
from tests.factories import sample_pages, scanned_pdf
from uocr_core.celery_app import make_celery
from uocr_core.tenants import CreatedKey

HOST = socket.gethostname()
VERSIONS = {"v1": {"engine": "rapidocr"}, "v2": {"engine": "rapidocr"}}
CANARY_TENANT = "canary-tenant"


def _routing(serve: str, canary: str | None = None) -> dict[str, str]:
    env = {"UOCR_MODELS__VERSIONS": json.dumps(VERSIONS), "UOCR_MODELS__SERVE": serve}
    if canary:
        env |= {
            "UOCR_MODELS__CANARY": canary,
            "UOCR_MODELS__CANARY_TENANTS": f'["{CANARY_TENANT}"]',
        }
    return env


@dataclass
class Deployment:
    stack: Stack
    logs: Path
    port: int
    api: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_api(self, routing: dict[str, str]) -> None:
        """(Re)start the API with this routing, as an operator does to promote or roll back."""
        if self.api is not None:
            self.api.stop()
        self.api = api_server({**self.stack.env, **routing}, self.logs, self.port).start()
        wait_http(f"{self.url}/healthz")

    def start_workers(self, *versions: str) -> list[Process]:
        """`uocr worker --model-version V` for each, once its node (cpu-V@host) answers."""
        env = {**self.stack.env, **_routing("v1"), "UOCR_WORKER__RENDER_PROCESSES": "0"}
        workers = [
            Process(
                [*UOCR_ARGV, "worker", "--model-version", version],
                env,
                self.logs / f"worker-{version}.log",
            ).start()
            for version in versions
        ]
        app = make_celery(self.stack.settings)
        nodes = {f"cpu-{version}@{HOST}" for version in versions}
        wait_until(
            lambda: nodes <= {name for reply in app.control.ping(timeout=0.5) for name in reply},
            90,
            what=f"workers {sorted(nodes)}",
        )
        return workers

    def client(self, tenant: CreatedKey) -> httpx.Client:
        headers = {"Authorization": f"Bearer {tenant.api_key}"}
        return httpx.Client(base_url=self.url, timeout=30, headers=headers)


@pytest.fixture
def deployment(stack: Stack, service_urls: ServiceUrls, tmp_path: Path) -> Iterator[Deployment]:
    with deployment_without_workers(stack, service_urls) as own:
        deployment = Deployment(own, tmp_path, free_port())
        try:
            yield deployment
        finally:
            if deployment.api is not None:
                deployment.api.stop()
            print(f"logs in {tmp_path}")


def _document() -> bytes:
    return scanned_pdf(sample_pages(1, lines=2))  # one short page: the 2 cores are shared


def _finished(client: httpx.Client, job_id: str) -> dict[str, Any]:
    job, _ = wait_for(client, job_id, timeout=90)
    assert job["status"] == "succeeded", job
    return job


def _produced_by(job: dict[str, Any], version: str) -> None:
    """The job, each page in its status and each page in result.json name the version."""
    assert job["model_version"] == version and job["engine"] == "rapidocr"
    assert [p["page"] for p in job["pages"]] == [1]
    assert all(p["attempts"] == 1 for p in job["pages"])  # each page read exactly once
    assert {(p["model_version"], p["engine"]) for p in job["pages"]} == {(version, "rapidocr")}


def _result(client: httpx.Client, job_id: str) -> dict[str, Any]:
    return client.get(f"/v1/jobs/{job_id}/result").raise_for_status().json()  # type: ignore[no-any-return]


def test_canary_tenant_on_v2_then_promotion_while_a_v1_job_waits_for_v1(
    deployment: Deployment,
) -> None:
    stack = deployment.stack
    canary, other = stack.new_tenant(CANARY_TENANT), stack.new_tenant()
    deployment.start_api(_routing("v1", canary="v2"))
    v1, v2 = deployment.start_workers("v1", "v2")
    flower_port = free_port()
    console = flower(stack.env, deployment.logs, flower_port).start()
    try:
        with deployment.client(canary) as c, deployment.client(other) as o:
            canary_job = submit(c, _document()).json()["id"]
            stable_job = submit(o, _document()).json()["id"]
            _produced_by(_finished(c, canary_job), "v2")
            _produced_by(_finished(o, stable_job), "v1")
            result = _result(c, canary_job)
            assert result["model_version"] == "v2"
            assert {p["model_version"] for p in result["pages"]} == {"v2"}

            # Flower lists each worker under a name that says its version.
            flower_url = f"http://{FLOWER_USER}:{FLOWER_PASSWORD}@127.0.0.1:{flower_port}"
            wait_http(f"{flower_url}/healthcheck")
            wanted = {f"cpu-v1@{HOST}", f"cpu-v2@{HOST}"}
            wait_until(
                lambda: (
                    wanted
                    <= set(
                        httpx.get(f"{flower_url}/api/workers", params={"refresh": "true"}).json()
                    )
                ),
                30,
                what="Flower to list both versions' workers",
            )

            # v1's worker stops; a job routed to v1 now waits in v1's queue, not v2's.
            v1.stop()
            waiting = submit(o, _document()).json()["id"]
            queued = o.get(f"/v1/jobs/{waiting}").json()
            assert (queued["status"], queued["model_version"]) == ("queued", "v1")
            broker = redis.Redis.from_url(stack.settings.redis.url)
            assert broker.llen("ocr.backlog.v1") >= 1

            # Promotion: v2 serves everyone. New jobs go to v2; the waiting one stays v1's.
            deployment.start_api(_routing("v2"))
            promoted = submit(o, _document()).json()["id"]
            _produced_by(_finished(o, promoted), "v2")
            assert o.get(f"/v1/jobs/{waiting}").json()["status"] == "queued"

            # v1's workers are kept until its queues drain: the waiting job finishes on v1.
            (v1,) = deployment.start_workers("v1")
            _produced_by(_finished(o, waiting), "v1")
            assert broker.llen("ocr.backlog.v1") == 0

            metrics = httpx.get(f"{deployment.url}/metrics").text
            for version in ("v1", "v2"):
                assert (
                    f'uocr_version_pages{{model_version="{version}",status="succeeded"}} 2.0'
                    in (metrics)
                )
            assert 'uocr_version_pages_per_second{model_version="v2"}' in metrics
            assert 'uocr_version_page_latency_seconds_count{model_version="v1"} 2.0' in metrics
    finally:
        for process in (console, v1, v2):
            process.stop()
