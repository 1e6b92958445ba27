"""The audit log over the real API on Postgres and S3: each tenant action writes its row, in
the same transaction as the change, naming the tenant, the key and the request id; the database
refuses to change or remove a row; and no tenant route serves it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text, update
from sqlalchemy.exc import DBAPIError

from ocr_api.main import create_app
from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.factory import make_engine as make_ocr_engine
from ocr_worker.pipeline import PageGroupPipeline
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf
from uocr_core import audit, object_keys
from uocr_core.db import transaction, utcnow
from uocr_core.models import ApiKey, AuditEvent
from uocr_core.tenants import CreatedKey, rotate_key

PDF = scanned_pdf(sample_pages(1, lines=1))


@pytest.fixture
def idle(stack: Stack, service_urls: ServiceUrls) -> Iterator[Stack]:
    """A deployment of its own whose submitted jobs stay queued: no worker reads its Redis."""
    with deployment_without_workers(stack, service_urls) as deployment:
        yield deployment


def _auth(key: CreatedKey, request_id: str = "") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key.api_key}"}
    return {**headers, "X-Request-ID": request_id} if request_id else headers


def _logged(deployment: Stack, **filters: Any) -> list[AuditEvent]:
    with deployment.sessions() as session:
        return audit.events(session, audit.AuditFilter(**filters))


def _actor(key: CreatedKey) -> str:
    return f"tenant:{key.tenant_name} key:{key.prefix}"


def test_the_database_refuses_to_change_or_remove_an_audit_row(idle: Stack) -> None:
    with transaction(idle.sessions) as session:
        audit.record(session, audit.OPERATOR, audit.Action.KEY_REVOKED, target="uocr_abcdefg")
    for statement in (
        "UPDATE audit_events SET actor = 'someone else'",
        "DELETE FROM audit_events",
        "TRUNCATE audit_events",
    ):
        with pytest.raises(DBAPIError, match="append-only"), transaction(idle.sessions) as session:
            session.execute(text(statement))
    with pytest.raises(DBAPIError, match="append-only"), transaction(idle.sessions) as session:
        session.execute(update(AuditEvent).values(detail={}))  # through the ORM alike
    assert [(e.actor, e.target) for e in _logged(idle)] == [("operator", "uocr_abcdefg")]


def test_submit_cancel_and_delete_each_write_a_row_naming_the_key_and_request(
    idle: Stack,
) -> None:
    owner = idle.new_tenant()
    with TestClient(create_app(idle.settings)) as client:
        files = {"file": ("contract.pdf", PDF)}
        submitted = client.post("/v1/jobs", files=files, headers=_auth(owner, "req-submit"))
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        canceled = client.post(f"/v1/jobs/{job_id}/cancel", headers=_auth(owner, "req-cancel"))
        assert canceled.status_code == 202, canceled.text
        deleted = client.delete(f"/v1/jobs/{job_id}", headers=_auth(owner, "req-delete"))
        assert deleted.status_code == 204
        refused = client.delete(f"/v1/jobs/{job_id}", headers=_auth(owner))
        assert refused.status_code == 410  # nothing changed: nothing logged
    logged = _logged(idle, tenant_id=owner.tenant_id)
    assert [(e.action, e.target, e.actor, e.request_id) for e in logged[1:]] == [
        ("job.submitted", job_id, _actor(owner), "req-submit"),
        ("job.canceled", job_id, _actor(owner), "req-cancel"),
        ("job.deleted", job_id, _actor(owner), "req-delete"),
    ]
    assert logged[0].action == "key.created"
    assert logged[1].detail == {"source": "contract.pdf", "pages": 1, "priority": "backlog"}
    assert logged[2].detail == {"status_was": "queued"}


def test_batch_documents_and_cancel_are_logged_once_per_call(idle: Stack) -> None:
    owner = idle.new_tenant()
    inbox_key = object_keys.upload_key(owner.tenant_id, "scan.pdf")
    idle.store.put(inbox_key, PDF)
    with TestClient(create_app(idle.settings)) as client:
        auth = _auth(owner, "req-batch")
        batch = client.post("/v1/batches", json={"open": True}, headers=auth).json()
        batch_id = batch["id"]
        documents = {"documents": [{"object_key": inbox_key}, {"object_key": inbox_key}]}
        added = client.post(f"/v1/batches/{batch_id}/documents", json=documents, headers=auth)
        assert added.status_code == 200, added.text
        sent = client.post(
            f"/v1/batches/{batch_id}/files", files={"file": ("a.pdf", PDF)}, headers=auth
        )
        assert sent.status_code == 200, sent.text
        manifest = client.get(
            f"/v1/batches/{batch_id}/manifest",
            headers={**auth, "Accept": "application/x-ndjson"},
        )
        assert manifest.status_code == 200
        assert client.post(f"/v1/batches/{batch_id}/cancel", headers=auth).status_code == 202
    logged = [(e.action, e.target, e.detail) for e in _logged(idle, tenant_id=owner.tenant_id)]
    assert logged[1:] == [
        ("batch.documents_submitted", batch_id, {"added": 2}),
        ("batch.documents_submitted", batch_id, {"added": 1}),
        ("result.downloaded", batch_id, {"item": "batch_manifest"}),
        ("batch.canceled", batch_id, {"waiting_canceled": 3, "running": 0}),
    ]


def test_every_download_is_logged_and_a_304_hands_nothing_over(idle: Stack) -> None:
    owner = idle.new_tenant()
    with TestClient(create_app(idle.settings)) as client:
        auth = _auth(owner, "req-get")
        job_id = client.post("/v1/jobs", files={"file": ("d.pdf", PDF)}, headers=auth).json()["id"]
        _finish_with_the_cpu_engine(idle, job_id)
        first = client.get(f"/v1/jobs/{job_id}/result", headers=auth)
        assert first.status_code == 200, first.text
        again = client.get(
            f"/v1/jobs/{job_id}/result", headers={**auth, "If-None-Match": first.headers["ETag"]}
        )
        assert again.status_code == 304
        for path in (
            "result?format=markdown",
            "result/link?format=pdf",
            "pages/1",
            "pages/1/image",
        ):
            accept = "image/jpeg" if path.endswith("image") else "*/*"
            answer = client.get(f"/v1/jobs/{job_id}/{path}", headers={**auth, "Accept": accept})
            assert answer.status_code == 200, (path, answer.text)
    downloads = _logged(idle, action="result.downloaded")
    assert {(e.target, e.actor, e.request_id) for e in downloads} == {
        (job_id, _actor(owner), "req-get")
    }
    assert [e.detail for e in downloads] == [
        {"item": "result", "format": "json"},
        {"item": "result", "format": "markdown"},
        {"item": "result_link", "format": "pdf"},
        {"item": "page", "page": 1},
        {"item": "page_image", "page": 1},
    ]


def test_a_rotated_key_works_beside_its_successor_until_the_overlap_ends(idle: Stack) -> None:
    old = idle.new_tenant()
    with transaction(idle.sessions) as session:
        new = rotate_key(session, old.prefix, overlap=timedelta(minutes=5)).new
    with TestClient(create_app(idle.settings)) as client:
        assert client.get("/v1/jobs", headers=_auth(old)).status_code == 200
        assert client.get("/v1/jobs", headers=_auth(new)).status_code == 200
        with transaction(idle.sessions) as session:  # the overlap runs out
            session.execute(
                update(ApiKey)
                .where(ApiKey.prefix == old.prefix)
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
        refused = client.get("/v1/jobs", headers=_auth(old))
        assert refused.status_code == 401
        problem = refused.json()
        assert problem["type"] == "urn:uocr:problem:key-expired"
        assert f"API key {old.prefix} expired on" in problem["detail"]
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        assert client.get("/v1/jobs", headers=_auth(new)).status_code == 200
        invalid = client.get("/v1/jobs", headers={"Authorization": "Bearer uocr_nonsense"})
        assert invalid.json()["type"] == "urn:uocr:problem:unauthorized"
    rotated = _logged(idle, action="key.rotated")
    assert [(e.target, e.detail["successor"]) for e in rotated] == [(old.prefix, new.prefix)]


def test_no_route_serves_the_audit_log_and_tenant_answers_carry_none_of_it(
    idle: Stack,
) -> None:
    owner = idle.new_tenant()
    with TestClient(create_app(idle.settings)) as client:
        paths = client.get("/openapi.json").json()["paths"]
        assert paths and not [path for path in paths if "audit" in path.lower()]
        auth = _auth(owner)
        job_id = client.post("/v1/jobs", files={"file": ("d.pdf", PDF)}, headers=auth).json()["id"]
        batch_id = client.post("/v1/batches", json={"open": True}, headers=auth).json()["id"]
        answers = [
            client.get(path, headers=auth).json()
            for path in ("/v1/jobs", f"/v1/jobs/{job_id}", "/v1/batches", f"/v1/batches/{batch_id}")
        ]
    assert len(_logged(idle, tenant_id=owner.tenant_id)) == 2  # there is something to leak
    shown = json.dumps(answers)
    for leak in ("job.submitted", "key.created", owner.prefix, "audit", "request_id"):
        assert leak not in shown


def _finish_with_the_cpu_engine(deployment: Stack, job_id: str) -> None:
    """What a worker does with the job's one page group, in this process: the API's message
    waits in a Redis database no worker reads."""
    settings = deployment.settings.model_copy(
        update={"worker": deployment.settings.worker.model_copy(update={"render_processes": 0})}
    )
    pipeline = PageGroupPipeline(
        sessions=deployment.sessions,
        store=deployment.store,
        engine=make_ocr_engine(settings),
        dispatcher=InlineDispatcher(),
        settings=settings,
        worker_id="audit-test",
    )
    assert pipeline.run(job_id, 0) == "ran"
