"""A real Celery worker writes its start to the audit log: node, queues, and the settings it
runs with, credentials redacted."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.processes import celery_worker, wait_until
from uocr_core import audit
from uocr_core.models import AuditEvent


def test_a_worker_records_its_start_with_its_settings_redacted(
    stack: Stack, service_urls: ServiceUrls, tmp_path: Path
) -> None:
    with deployment_without_workers(stack, service_urls) as idle:
        env = {
            **idle.env,
            "UOCR_WORKER__PRELOAD_ENGINE": "false",  # the record, not the model, is under test
            "UOCR_S3__SECRET_ACCESS_KEY": "s3-secret-of-this-worker",
        }
        worker = celery_worker(env, tmp_path, name="audited@host", queues="control", beat=False)
        worker.start()
        try:

            def started() -> list[AuditEvent]:
                with idle.sessions() as session:
                    query = audit.AuditFilter(action=audit.Action.WORKER_STARTED.value)
                    return audit.events(session, query)

            wait_until(started, 90, what="the worker's start in the audit log")
        finally:
            worker.stop()
        (event,) = started()
    assert (event.actor, event.target, event.tenant_id) == (
        "worker:audited@host",
        "audited@host",
        None,
    )
    assert event.detail["queues"] == ["control"] and event.detail["engine"] == "rapidocr"
    ran_with = event.detail["settings"]
    assert ran_with["database"]["url"] == idle.settings.database.url
    assert ran_with["s3"]["secret_access_key"] == "[redacted]"
    assert ran_with["worker"]["preload_engine"] is False
    assert "s3-secret-of-this-worker" not in json.dumps(event.detail)
