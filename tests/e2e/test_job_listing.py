"""GET /v1/jobs: a tenant's own jobs, newest first, page by page, by status."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf


def test_a_tenant_lists_its_own_jobs_newest_first_page_by_page(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    pdf = scanned_pdf(sample_pages(1, lines=1))
    with deployment_without_workers(stack, service_urls) as idle:
        owner, other = idle.new_tenant(), idle.new_tenant()
        with TestClient(create_app(idle.settings)) as client:
            mine = {"Authorization": f"Bearer {owner.api_key}"}
            theirs = {"Authorization": f"Bearer {other.api_key}"}

            def submit(name: str, auth: dict[str, str]) -> str:
                response = client.post("/v1/jobs", files={"file": (name, pdf)}, headers=auth)
                return str(response.json()["id"])

            ids = [submit(f"box-{n}.pdf", mine) for n in range(5)]
            submit("not-yours.pdf", theirs)

            def page(auth: dict[str, str], **params: str | int) -> dict[str, Any]:
                response = client.get("/v1/jobs", params=params, headers=auth)
                assert response.status_code == 200, response.text
                return response.json()

            first = page(mine, limit=2)
            assert [j["id"] for j in first["jobs"]] == [ids[4], ids[3]]
            assert first["jobs"][0]["source"] == "box-4.pdf"
            base = idle.settings.public_base_url.rstrip("/")
            assert first["jobs"][0]["status_url"] == f"{base}/v1/jobs/{ids[4]}"  # absolute
            late = submit("late.pdf", mine)  # arrives between pages: shifts nothing
            second = page(mine, limit=2, cursor=first["next_cursor"])
            assert [j["id"] for j in second["jobs"]] == [ids[2], ids[1]]
            last = page(mine, limit=2, cursor=second["next_cursor"])
            assert [j["id"] for j in last["jobs"]] == [ids[0]] and last["next_cursor"] is None
            assert [j["id"] for j in page(mine, limit=1)["jobs"]] == [late]

            assert [j["source"] for j in page(theirs)["jobs"]] == ["not-yours.pdf"]

            assert client.post(f"/v1/jobs/{ids[0]}/cancel", headers=mine).status_code == 202
            assert [j["id"] for j in page(mine, status="canceled")["jobs"]] == [ids[0]]
            assert len(page(mine, status="queued")["jobs"]) == 5
            assert client.delete(f"/v1/jobs/{ids[1]}", headers=mine).status_code == 204
            listed = [j["id"] for j in page(mine, limit=100)["jobs"]]
            assert listed == [late, ids[4], ids[3], ids[2], ids[0]]  # the deleted one is gone

            bad = client.get("/v1/jobs", params={"cursor": "not-a-cursor"}, headers=mine)
            assert bad.status_code == 422 and "cursor" in bad.json()["detail"]
            assert client.get("/v1/jobs", params={"limit": 0}, headers=mine).status_code == 422
            assert client.get("/v1/jobs").status_code == 401
