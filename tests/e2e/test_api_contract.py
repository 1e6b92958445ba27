"""What a client author relies on, against the live API: problem details with a request id for
every error, no 5xx from input, honest methods, negotiation, cacheable results, offline docs."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf

PROBLEM = "application/problem+json"
JOB_ROUTES = ["", "/result", "/result/link", "/pages/1"]


def _is_problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and str(body["type"]).startswith("urn:uocr:problem:")
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["instance"] == response.request.url.path
    return body


@pytest.fixture(scope="module")
def finished_job(service: Service) -> tuple[httpx.Client, str]:
    client = service.client(service.stack.new_tenant())
    accepted = submit(client, scanned_pdf(sample_pages(2, seed=21), seed=21))
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["id"]
    assert accepted.headers["location"] == f"{service.api_url}/v1/jobs/{job_id}"
    wait_for(client, job_id)
    return client, job_id


def test_input_that_once_gave_500s_gets_a_4xx_naming_the_problem(service: Service) -> None:
    with service.client(service.stack.new_tenant()) as client:
        document = scanned_pdf(sample_pages(1, seed=5), seed=5)
        for _ in range(2):  # the second empty key used to hit a unique violation
            empty_key = submit(client, document, headers={"Idempotency-Key": ""})
            assert "idempotency-key" in str(_is_problem(empty_key, 422)["detail"]).lower()
        for route in JOB_ROUTES:
            assert "not found" in str(
                _is_problem(client.get(f"/v1/jobs/%00{route}"), 404)["detail"]
            )
        _is_problem(client.delete("/v1/jobs/%00"), 404)
        deep = "[" * 5000 + "]" * 5000
        in_form = submit(
            client, document, metadata=json.dumps({"a": json.loads("[" * 50 + "]" * 50)})
        )
        assert "deep" in str(_is_problem(in_form, 422)["detail"])
        raw_deep = submit(client, document, metadata='{"a": ' + deep + "}")
        _is_problem(raw_deep, 422)
        in_json = client.post(
            "/v1/jobs",
            content='{"object_key": "x", "metadata": {"a": ' + deep + "}}",
            headers={"content-type": "application/json"},
        )
        _is_problem(in_json, 422)


def test_validation_problems_list_each_field(service: Service) -> None:
    with service.client(service.stack.new_tenant()) as client:
        body = _is_problem(client.get("/v1/jobs", params={"limit": 0}), 422)
        assert body["errors"] and body["errors"][0]["loc"] == ["query", "limit"]  # type: ignore[index]
        typo = _is_problem(client.get("/v1/jobs", params={"staus": "failed"}), 422)
        assert "staus" in str(typo["detail"]) and "status" in str(typo["detail"])


def test_a_body_field_the_api_does_not_know_is_refused_naming_it(service: Service) -> None:
    with service.client(service.stack.new_tenant()) as client:
        for path, body, unknown in [
            ("/v1/uploads", {"filename": "a.pdf", "webhook": "https://x.example/h"}, "webhook"),
            ("/v1/batches", {"open": True, "prioirty": "interactive"}, "prioirty"),
            ("/v1/batches", {"documents": [{"object_key": "k", "page": "1"}]}, "page"),
            ("/v1/jobs", {"object_key": "k", "webhook": "https://x.example/h"}, "webhook"),
        ]:
            problem = _is_problem(client.post(path, json=body), 422)
            errors = problem["errors"]
            assert isinstance(errors, list)
            assert unknown in [error["loc"][-1] for error in errors], problem
        spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for name in ("UploadCreate", "BatchCreate", "BatchDocument", "BatchDocumentsAdd"):
        assert schemas[name]["additionalProperties"] is False, name  # as the API behaves
    assert "413" in spec["paths"]["/v1/uploads"]["post"]["responses"]


def test_the_request_id_is_echoed_and_logged(service: Service) -> None:
    request_id = f"ticket-{uuid.uuid4().hex[:12]}"
    with service.client(service.stack.new_tenant()) as client:
        response = client.get("/v1/jobs", headers={"X-Request-ID": request_id})
        assert response.status_code == 200 and response.headers["x-request-id"] == request_id
        forged = client.get("/v1/jobs", headers={"X-Request-ID": 'a b"c'})
        assert re.fullmatch(r"[0-9a-f]{32}", forged.headers["x-request-id"])  # replaced
    api_log = service.logs / "api.log"

    def logged() -> bool:
        for line in api_log.read_text(errors="replace").splitlines():
            try:
                if json.loads(line).get("request_id") == request_id:
                    return True
            except ValueError:
                continue
        return False

    wait_until(logged, 10, what=f"a JSON log line carrying request_id {request_id}")


def test_methods_are_answered_as_http_says(service: Service) -> None:
    job_url = f"/v1/jobs/{uuid.uuid4()}"
    with service.client(service.stack.new_tenant()) as client:
        options = client.options(job_url)
        assert options.status_code == 204
        assert options.headers["allow"] == "DELETE, GET, HEAD, OPTIONS"
        wrong = client.put(job_url)
        assert "PUT" in str(_is_problem(wrong, 405)["detail"])
        assert wrong.headers["allow"] == "DELETE, GET, HEAD, OPTIONS"
        head = client.head("/v1/jobs")
        assert head.status_code == 200 and head.content == b""
        assert int(head.headers["content-length"]) > 0  # what the GET would send
        _is_problem(client.get("/v1/nothing-here"), 404)


def test_results_are_negotiated_cacheable_files(finished_job: tuple[httpx.Client, str]) -> None:
    client, job_id = finished_job
    result = client.get(f"/v1/jobs/{job_id}/result")
    assert result.status_code == 200 and result.headers["content-type"].startswith(
        "application/json"
    )
    assert result.json()["pages"][0]["page"] == 1
    assert result.headers["cache-control"] == "private, max-age=31536000, immutable"
    assert result.headers["content-disposition"] == f'attachment; filename="{job_id}-result.json"'
    again = client.get(
        f"/v1/jobs/{job_id}/result", headers={"If-None-Match": result.headers["etag"]}
    )
    assert again.status_code == 304 and again.content == b""
    pdf = client.get(f"/v1/jobs/{job_id}/result", headers={"Accept": "application/pdf"})
    assert pdf.headers["content-type"] == "application/pdf" and pdf.content.startswith(b"%PDF")
    lines = client.get(f"/v1/jobs/{job_id}/result", params={"format": "jsonl"})
    assert [json.loads(line)["page"] for line in lines.text.splitlines()] == [1, 2]
    refused = client.get(f"/v1/jobs/{job_id}/result", headers={"Accept": "image/png"})
    assert "image/png" in str(_is_problem(refused, 406)["detail"])
    page = client.get(f"/v1/jobs/{job_id}/pages/2")
    assert page.json()["page"] == 2 and page.headers["etag"] != result.headers["etag"]
    cached = client.get(
        f"/v1/jobs/{job_id}/pages/2", headers={"If-None-Match": page.headers["etag"]}
    )
    assert cached.status_code == 304


def test_docs_work_without_internet(service: Service) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{service.api_url}{page}").text
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources and all(src.startswith("/docs-assets/") for src in sources), sources
        for src in sources:
            asset = httpx.get(f"{service.api_url}{src}")
            assert asset.status_code == 200 and len(asset.content) > 1000, src
