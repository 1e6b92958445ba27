"""A worker killed while it assembles a long document's results (every page read, the result
files being written): the job stays running with no result served, the reconciler has another
worker assemble it again, and every output then holds every page once and in order, with no
page read twice. Real processes: the API, a control worker with beat, simulated-engine OCR
workers (the full size, 3,000 pages: bench/service/long_document_bench.py)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pymupdf
import pytest
from sqlalchemy import select

from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import (
    Process,
    api_server,
    celery_worker,
    free_port,
    wait_http,
    wait_until,
)
from uocr_core.contracts import OCR_QUEUES
from uocr_core.models import Job, Page

PAGES = 300
ENV = {
    "UOCR_PAGE_GROUP_SIZE": "25",
    "UOCR_SIMULATED__SECONDS_PER_PAGE": "0",
    "UOCR_SIMULATED__TOKENS_PER_PAGE": "700",
    # The reconciler notices a job whose groups all settled without it finishing soon after.
    "UOCR_WORKER__REDISPATCH_AFTER_SECONDS": "3",
    "UOCR_WORKER__RECONCILE_INTERVAL_SECONDS": "1",
}


def _book(pages: int) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=420, height=595)
        page.insert_text((40, 60), f"Chapter {n // 10 + 1}, page {n + 1}", fontsize=14)
    return doc.tobytes()


@pytest.fixture
def long_documents(
    stack: Stack, service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, str, dict[str, str]]]:
    """A deployment that takes 300-page documents and reads them with the simulated engine:
    its API and control worker (beat: the reconciler) running, its OCR workers left to the
    test. Yields the deployment, the API's URL and the OCR workers' environment."""
    with deployment_without_workers(
        stack, service_urls, max_pages_per_request=PAGES, engine="simulated"
    ) as deployment:
        logs = tmp_path_factory.mktemp("long-assembly-logs")
        port = free_port()
        env = {**deployment.env, **ENV, "UOCR_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}"}
        control = celery_worker(env, logs, name="control@long", queues="control", beat=True)
        processes = [control.start(), api_server(env, logs, port).start()]
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz")
            yield deployment, f"http://127.0.0.1:{port}", {**env, "_logs": str(logs)}
        finally:
            for process in processes:
                process.stop()


def _ocr_worker(env: dict[str, str], name: str) -> Process:
    logs = Path(env["_logs"])
    clean = {k: v for k, v in env.items() if not k.startswith("_")}
    return celery_worker(clean, logs, name=name, queues=",".join(OCR_QUEUES), beat=False).start()


def test_a_worker_killed_during_a_long_assembly_loses_nothing_and_reads_no_page_twice(
    long_documents: tuple[Stack, str, dict[str, str]],
) -> None:
    deployment, api_url, env = long_documents
    tenant = deployment.new_tenant()
    headers = {"Authorization": f"Bearer {tenant.api_key}"}
    with httpx.Client(base_url=api_url, timeout=30, headers=headers) as client:
        job_id = submit(client, _book(PAGES), name="book.pdf").json()["id"]
        worker = _ocr_worker(env, "ocr-1@long")

        def assembling() -> bool:
            with deployment.sessions() as session:
                job = session.get(Job, job_id)
                assert job is not None
                assert job.status != "succeeded", "the job finished before it could be stopped"
                return job.pages_done == PAGES

        wait_until(assembling, 240, interval=0.02, what="every page read, the job not finished")
        assert worker.popen is not None
        worker.signal(signal.SIGKILL)  # the whole worker: parent and pool child
        worker.popen.wait(10)

        # Killed mid-assembly: the job is still running and no result is served, whatever
        # files the dead worker got to write.
        status = client.get(f"/v1/jobs/{job_id}").raise_for_status().json()
        assert (status["status"], status["pages_done"]) == ("running", PAGES)
        assert client.get(f"/v1/jobs/{job_id}/result").status_code == 409

        second = _ocr_worker(env, "ocr-2@long")
        try:
            job, _ = wait_for(client, job_id, timeout=240)
        finally:
            second.stop()
        assert (job["status"], job["pages_done"], job["pages_failed"]) == ("succeeded", PAGES, 0)
        numbers = list(range(1, PAGES + 1))

        def result(fmt: str) -> str:
            answer = client.get(f"/v1/jobs/{job_id}/result", params={"format": fmt})
            return answer.raise_for_status().text

        document = json.loads(result("json"))
        assert [p["page"] for p in document["pages"]] == numbers
        lines = [json.loads(line) for line in result("jsonl").splitlines()]
        assert lines == document["pages"]
        markers = [int(c.split(" -->")[0]) for c in result("markdown").split("<!-- page ")[1:]]
        assert markers == numbers
        assert result("text").count("\f") == PAGES - 1
        assert result("hocr").count('class="ocr_page"') == PAGES
        pdf = client.get(f"/v1/jobs/{job_id}/result", params={"format": "pdf"})
        with pymupdf.open(stream=pdf.raise_for_status().content, filetype="pdf") as searchable:
            assert searchable.page_count == PAGES

    with deployment.sessions() as session:
        attempts = session.scalars(select(Page.attempts).where(Page.job_id == job_id)).all()
    assert sorted(attempts) == [1] * PAGES  # only the assembly ran again, no page
