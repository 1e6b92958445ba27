"""GET /v1/jobs/{id} for a long document: a summary by default, its pages in ranges on request
(each answer naming the next range), every page when asked; an ETag so a poll that changed
nothing costs a 304."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf


def test_a_long_documents_status_is_a_summary_with_its_pages_in_ranges(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls, status_pages_inline=3) as idle:
        tenant = idle.new_tenant()
        auth = {"Authorization": f"Bearer {tenant.api_key}"}
        with TestClient(create_app(idle.settings)) as client:

            def submit(pages: int) -> str:
                pdf = scanned_pdf(sample_pages(pages, lines=1))
                response = client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers=auth)
                assert response.status_code == 202, response.text
                return str(response.json()["id"])

            def status(url: str) -> dict[str, Any]:
                response = client.get(url, headers=auth)
                assert response.status_code == 200, response.text
                return response.json()  # type: ignore[no-any-return]

            short, long = submit(3), submit(7)
            assert [p["page"] for p in status(f"/v1/jobs/{short}")["pages"]] == [1, 2, 3]

            summary = status(f"/v1/jobs/{long}")
            assert (summary["pages_total"], summary["pages"], summary["pages_listed"]) == (
                7,
                [],
                None,
            )
            assert summary["groups_total"] > 0 and summary["groups_done"] == 0
            listed, url = [], summary["pages_next"]
            while url is not None:  # follow the ranges: every page once, in order
                answer = status(url)
                listed += [p["page"] for p in answer["pages"]]
                url = answer["pages_next"]
            assert listed == list(range(1, 8))
            assert status(f"/v1/jobs/{long}?pages=2-3")["pages_listed"] == "2-3"
            assert [p["page"] for p in status(f"/v1/jobs/{long}?pages=all")["pages"]] == list(
                range(1, 8)
            )

            assert status(f"/v1/jobs/{long}?pages=5-2")["pages"] == []  # no page lies in 5..2
            for bad in ("1-", "some", "1-3;drop", "1-3,7", "-1-3", "1" * 20 + "-2"):
                refused = client.get(f"/v1/jobs/{long}", params={"pages": bad}, headers=auth)
                assert refused.status_code == 422, (bad, refused.text)
                assert "pages" in refused.json()["detail"], refused.text


def test_a_poll_that_changed_nothing_gets_304_and_a_change_a_new_answer(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls) as idle:
        tenant = idle.new_tenant()
        auth = {"Authorization": f"Bearer {tenant.api_key}"}
        with TestClient(create_app(idle.settings)) as client:
            pdf = scanned_pdf(sample_pages(2, lines=1))
            job_id = client.post("/v1/jobs", files={"file": ("d.pdf", pdf)}, headers=auth).json()[
                "id"
            ]
            first = client.get(f"/v1/jobs/{job_id}", headers=auth)
            etag = first.headers["ETag"]
            again = client.get(f"/v1/jobs/{job_id}", headers={**auth, "If-None-Match": etag})
            assert (again.status_code, again.content, again.headers["ETag"]) == (304, b"", etag)
            assert client.post(f"/v1/jobs/{job_id}/cancel", headers=auth).status_code == 202
            changed = client.get(f"/v1/jobs/{job_id}", headers={**auth, "If-None-Match": etag})
            assert changed.status_code == 200 and changed.json()["status"] == "canceled"
            assert changed.headers["ETag"] != etag
