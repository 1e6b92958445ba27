"""schemathesis against the live API: every check, every operation, a bounded number of
examples. Any 5xx, any status, media type, header or body the OpenAPI document does not
describe, fails the test with schemathesis' own report (and a curl line to reproduce)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.factories import sample_pages, scanned_pdf

ROOT = Path(__file__).resolve().parents[2]
# schemathesis 4 needs Python 3.12; .ci/setup gives it its own venv.
SCHEMATHESIS = ROOT / ".ci-state" / "schemathesis" / "bin" / "st"
BASE_CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = "20261203"  # fixed: a failure in CI reproduces locally with the same examples


def _operation(name: str, job_id: str, parameter: str = "job_id") -> str:
    return (
        f'\n[[operations]]\ninclude-name = "{name}"\nparameters = {{ {parameter} = "{job_id}" }}\n'
    )


def test_the_live_api_answers_as_its_openapi_document_says(
    service: Service, tmp_path: Path
) -> None:
    if not SCHEMATHESIS.exists():
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail(f"{SCHEMATHESIS} is missing: run bash .ci/setup")
        pytest.skip("schemathesis is not installed (bash .ci/setup installs it)")
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        finished, doomed = (
            submit(client, scanned_pdf(sample_pages(2, seed=seed), seed=seed)).json()["id"]
            for seed in (3, 4)
        )
        wait_for(client, finished)
        batch = client.post("/v1/batches", json={"name": "contract"}).json()["id"]
    # Real ids reach the routes' real answers (200, 304, 409, 410), not only 404; DELETE gets
    # a job of its own, so the others keep theirs.
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        BASE_CONFIG.read_text()
        + _operation("DELETE /v1/jobs/{job_id}", doomed)
        + "".join(
            _operation(f"{method} /v1/jobs/{{job_id}}{suffix}", finished)
            for method, suffix in [
                ("GET", ""),
                ("GET", "/result"),
                ("GET", "/result/link"),
                ("GET", "/pages/{page_no}"),
                ("GET", "/pages/{page_no}/image"),
                ("POST", "/cancel"),
            ]
        )
        + "".join(
            _operation(f"{method} /v1/batches/{{batch_id}}{suffix}", batch, "batch_id")
            for method, suffix in [
                ("GET", ""),
                ("GET", "/jobs"),
                ("GET", "/manifest"),
                ("POST", "/documents"),
                ("POST", "/close"),
                ("POST", "/cancel"),
            ]
        )
    )
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "run",
            f"{service.api_url}/openapi.json",
            "--header",
            f"Authorization: Bearer {tenant.api_key}",
            "--checks",
            "all",
            "--max-examples",
            "25",
            "--seed",
            SEED,
            "--workers",
            "2",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-2000:]
