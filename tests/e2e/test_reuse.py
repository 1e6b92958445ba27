"""Content dedup: the same document with the same options, asked with reuse_results, takes the
finished results instead of being read again; anything different is read anew."""

from __future__ import annotations

import json

import httpx

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf


def _result(client: httpx.Client, job_id: str) -> dict[str, object]:
    return json.loads(client.get(f"/v1/jobs/{job_id}/result").content)


def test_an_identical_document_takes_the_earlier_results(service: Service) -> None:
    tenant = service.stack.new_tenant()
    document = scanned_pdf(sample_pages(3, lines=3, seed=41), seed=41)
    with service.client(tenant) as client:
        first = wait_for(client, submit(client, document).json()["id"])[0]
        assert first["status"] == "succeeded" and first["reused_from"] is None
        again = submit(client, document, name="copy.pdf", reuse_results="true")
        assert again.status_code == 202, again.text
        reused = wait_for(client, again.json()["id"], timeout=30)[0]
        assert reused["status"] == "succeeded" and reused["reused_from"] == first["id"]
        assert [p["status"] for p in reused["pages"]] == ["succeeded"] * 3
        original, copy = _result(client, first["id"]), _result(client, reused["id"])
        assert copy["job_id"] == reused["id"]  # assembled for the new job
        assert copy["pages"] == original["pages"]
        page = client.get(f"/v1/jobs/{reused['id']}/pages/2").json()
        assert page == client.get(f"/v1/jobs/{first['id']}/pages/2").json()

        # A batch asking for reuse: its document, read at admission, takes them too.
        key = f"inbox/{tenant.tenant_id}/again/scan.pdf"
        service.stack.store.put(key, document, "application/pdf")
        batch = client.post(
            "/v1/batches", json={"documents": [{"object_key": key}], "reuse_results": True}
        ).json()
        wait_until(
            lambda: client.get(batch["status_url"]).json()["status"] == "succeeded",
            60,
            what="the batch",
        )
        batch_job = client.get(f"{batch['status_url']}/jobs").json()["jobs"][0]
        # the latest job with the content: the reused copy is one too
        assert client.get(batch_job["status_url"]).json()["reused_from"] in (
            first["id"],
            reused["id"],
        )

        # Other pages, or no reuse asked: read anew.
        part = wait_for(
            client, submit(client, document, pages="1-2", reuse_results="true").json()["id"]
        )[0]
        plain = wait_for(client, submit(client, document).json()["id"])[0]
        assert part["reused_from"] is None and plain["reused_from"] is None

    # Another tenant's identical document is never taken.
    with service.client(service.stack.new_tenant()) as other:
        theirs = wait_for(other, submit(other, document, reuse_results="true").json()["id"])[0]
        assert theirs["reused_from"] is None
