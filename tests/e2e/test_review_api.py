"""The review list over HTTP on the real stack (Postgres, S3): GET /v1/review lists a
tenant's pages worth a look, oldest first; POST .../pages/{n}/reviewed takes one off; bad
queries get clear 4xx answers, and no tenant sees or marks another's pages. (Which pages the
record stage puts on the list: tests/worker/test_review_list.py.)"""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import update

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf
from uocr_core.db import transaction, utcnow
from uocr_core.models import Page


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
