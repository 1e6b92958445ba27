"""Keys, tenants and retried submits, through the running API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit
from tests.factories import sample_pages, scanned_pdf

NO_SUCH_JOB = "00000000-0000-4000-8000-000000000000"  # well-formed, so the key is what's judged


def test_a_retried_submit_with_the_same_idempotency_key_returns_the_same_job(
    service: Service,
) -> None:
    tenant, other = service.stack.new_tenant(), service.stack.new_tenant()
    pdf = scanned_pdf(sample_pages(1, lines=2))
    key = {"Idempotency-Key": "upload-2026-12-02-0001"}
    with service.client(tenant) as client, service.client(other) as other_client:
        first = submit(client, pdf, headers=key, metadata='{"a": 1, "b": 2}')
        again = submit(client, pdf, headers=key, metadata='{"b": 2, "a": 1}')  # same object
        theirs = submit(other_client, pdf, headers=key)
    assert first.status_code == again.status_code == theirs.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert theirs.json()["id"] != first.json()["id"]  # keys are scoped to their tenant


def test_an_idempotency_key_reused_for_another_request_is_a_conflict(service: Service) -> None:
    tenant = service.stack.new_tenant()
    pdf = scanned_pdf(sample_pages(2, lines=2))
    key = {"Idempotency-Key": "k"}
    with service.client(tenant) as client:
        job_id = submit(client, pdf, headers=key).json()["id"]
        reused = [
            submit(client, scanned_pdf(sample_pages(1, lines=2)), headers=key),  # other document
            submit(client, pdf, name="renamed.pdf", headers=key),
            submit(client, pdf, headers=key, pages="1"),  # other options
            submit(client, pdf, headers=key, priority="interactive"),
            submit(client, pdf, headers=key, metadata='{"customer": 7}'),
        ]
        listed = client.get("/v1/jobs").json()["jobs"]
    for response in reused:
        assert response.status_code == 409, response.text
        assert response.json()["detail"].startswith(
            f"Idempotency-Key 'k' was used for a different request (job {job_id})"
        )
    assert [j["id"] for j in listed] == [job_id]  # nothing else was accepted


def test_one_tenant_never_sees_another_tenants_job(service: Service) -> None:
    owner, stranger = service.stack.new_tenant(), service.stack.new_tenant()
    with service.client(owner) as client:
        job_id = submit(client, scanned_pdf(sample_pages(1, lines=2))).json()["id"]
        assert client.get(f"/v1/jobs/{job_id}").status_code == 200
    with service.client(stranger) as client:
        for response in (
            client.get(f"/v1/jobs/{job_id}"),
            client.get(f"/v1/jobs/{job_id}/result"),
            client.get(f"/v1/jobs/{job_id}/pages/1"),
            client.post(f"/v1/jobs/{job_id}/cancel"),
            client.delete(f"/v1/jobs/{job_id}"),
        ):
            assert response.status_code == 404, response.text
            assert job_id in response.json()["detail"]


def test_requests_without_a_valid_key_are_refused(service: Service) -> None:
    assert httpx.get(f"{service.api_url}/v1/jobs/{NO_SUCH_JOB}").status_code == 401
    bad = httpx.get(
        f"{service.api_url}/v1/jobs/{NO_SUCH_JOB}", headers={"Authorization": "Bearer uocr_nope"}
    )
    assert bad.status_code == 401 and "invalid" in bad.json()["detail"]


def test_a_key_revoked_with_the_cli_is_refused_at_once(service: Service) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        assert client.get(f"/v1/jobs/{NO_SUCH_JOB}").status_code == 404  # the key works
        revoked = subprocess.run(
            [str(Path(sys.executable).with_name("uocr")), "keys", "revoke", tenant.api_key[:12]],
            env={**os.environ, **service.stack.env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert revoked.returncode == 0, revoked.stderr
        assert f"revoked {tenant.api_key[:12]} of tenant {tenant.tenant_name}" in revoked.stdout
        refused = client.get(f"/v1/jobs/{NO_SUCH_JOB}")
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
