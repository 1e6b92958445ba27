"""The review list over HTTP on the real stack (Postgres, S3): GET /v1/review lists a
tenant's pages worth a look, oldest first; POST .../pages/{n}/reviewed takes one off; bad
queries get clear 4xx answers, and no tenant sees or marks another's pages; ``uocr fetch
--review`` writes a batch's list. (Which pages the record stage puts on the list:
tests/worker/test_review_list.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.conftest import Service
from tests.factories import sample_pages, scanned_pdf
from uocr_core.db import transaction, utcnow
from uocr_core.models import Batch, Job, Page


def test_pages_to_review_are_listed_marked_and_kept_to_their_tenant(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls) as idle:
        owner, other = idle.new_tenant(), idle.new_tenant()
        auth = {"Authorization": f"Bearer {owner.api_key}"}
        other_auth = {"Authorization": f"Bearer {other.api_key}"}
        with TestClient(create_app(idle.settings)) as client:

            def submit() -> str:
                pdf = scanned_pdf(sample_pages(3, lines=1))
                answer = client.post("/v1/jobs", files={"file": ("scan.pdf", pdf)}, headers=auth)
                assert answer.status_code == 202, answer.text
                return str(answer.json()["id"])

            first, second = submit(), submit()
            assert client.get("/v1/review", headers=auth).json()["pages"] == []
            # As the record stage leaves them: page 2 of the first document read with low
            # confidence an hour ago, page 1 of the second caught looping a minute ago.
            now = utcnow()
            with transaction(idle.sessions) as session:
                for job_id, page_no, ago, confidence in (
                    (first, 2, 60, 0.61),
                    (second, 1, 1, 0.97),
                ):
                    session.execute(
                        update(Page)
                        .where(Page.job_id == job_id, Page.page_no == page_no)
                        .values(
                            needs_review=True,
                            confidence=confidence,
                            finished_at=now - timedelta(minutes=ago),
                        )
                    )

            listed = client.get("/v1/review", headers=auth).json()
            assert [(p["job_id"], p["page"]) for p in listed["pages"]] == [(first, 2), (second, 1)]
            assert listed["pages"][0]["confidence"] == 0.61
            assert listed["pages"][0]["source"] == "scan.pdf"
            assert listed["pages"][0]["image_url"].endswith(f"/v1/jobs/{first}/pages/2/image")
            assert client.get("/v1/review", headers=other_auth).json()["pages"] == []
            paged = client.get("/v1/review", params={"limit": 1}, headers=auth).json()
            after = client.get("/v1/review", params={"cursor": paged["next_cursor"]}, headers=auth)
            assert [p["page"] for p in after.json()["pages"]] == [1]

            url = f"/v1/jobs/{first}/pages/2/reviewed"
            assert client.post(url, headers=other_auth).status_code == 404  # not theirs
            marked = client.post(url, headers=auth)
            assert marked.status_code == 200, marked.text
            assert marked.json()["reviewed_by"].startswith("tenant:")
            again = client.post(url, headers=auth).json()  # the first mark stays
            assert again["reviewed_at"] == marked.json()["reviewed_at"]
            listed = client.get("/v1/review", headers=auth).json()
            assert [(p["job_id"], p["page"]) for p in listed["pages"]] == [(second, 1)]

            for params, named in (
                ({"batch_id": "not-a-batch\x00"}, "batch_id"),
                ({"limit": 0}, "limit"),
                ({"limit": "all"}, "limit"),
                ({"cursor": "x" * 600}, "cursor"),
                ({"cursor": "bm90IG9uZQ=="}, "cursor"),
                (
                    {"cursor": "MjAyNi0wMS0wMVQwMDowMDowMCswMDowMHzCsg=="},
                    "cursor",
                ),  # a superscript two: no page id
            ):
                refused = client.get("/v1/review", params=params, headers=auth)
                assert refused.status_code == 422, (params, refused.text)
                assert named in refused.text, refused.text
            for bad in (f"/v1/jobs/{first}/pages/0/reviewed", f"/v1/jobs/{first}/pages/x/reviewed"):
                assert client.post(bad, headers=auth).status_code == 422
            assert (
                client.post(f"/v1/jobs/{first}/pages/99/reviewed", headers=auth).status_code == 404
            )
            huge = f"/v1/jobs/{first}/pages/{10**20}/reviewed"
            assert client.post(huge, headers=auth).status_code == 422


def test_uocr_fetch_review_writes_the_batchs_pages_to_review(
    service: Service, tmp_path: Path
) -> None:
    """A batch read by the real workers; one page of it on the review list (as a low
    confidence would put it there); ``uocr fetch BATCH --review`` writes that page, with the
    document's name and where to mark it, and nothing of another batch."""
    tenant = service.stack.new_tenant()
    folder = tmp_path / "box"
    folder.mkdir()
    for n in range(2):
        pdf = scanned_pdf(sample_pages(2, lines=2, seed=90 + n))
        (folder / f"contract-{n}.pdf").write_bytes(pdf)
    env = {**os.environ, **service.stack.env, "UOCR_URL": service.api_url}
    env["UOCR_API_KEY"] = tenant.api_key

    def uocr(*args: str) -> str:
        run = subprocess.run(
            [sys.executable, "-m", "uocr_cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout

    uocr("submit", str(folder), "--batch", "contracts", "--wait")
    with service.stack.sessions() as session:
        batch_id = session.scalar(select(Batch.id).where(Batch.name == "contracts"))
        job_id = session.scalar(
            select(Job.id).where(Job.batch_id == batch_id, Job.source_name == "contract-1.pdf")
        )
    with transaction(service.stack.sessions) as session:
        session.execute(
            update(Page)
            .where(Page.job_id == job_id, Page.page_no == 2)
            .values(needs_review=True, confidence=0.42)
        )
    assert "1 pages to review" in uocr("fetch", str(batch_id), "--out", str(tmp_path), "--review")
    (line,) = (tmp_path / "review.jsonl").read_text().splitlines()
    page = json.loads(line)
    assert (page["job_id"], page["page"], page["source"]) == (job_id, 2, "contract-1.pdf")
    assert page["confidence"] == 0.42 and page["review_url"].startswith(service.api_url)
