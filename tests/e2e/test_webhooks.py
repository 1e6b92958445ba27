"""Webhook delivery: retried on 5xx and on a receiver that is down, never on 4xx; every attempt
is recorded and the event id stays the same across attempts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import select

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import WebhookReceiver, free_port, wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.models import WebhookDelivery
from uocr_core.webhooks.signing import ATTEMPT_HEADER, EVENT_ID_HEADER

UOCR = str(Path(sys.executable).with_name("uocr"))


def _run_job(service: Service, webhook_url: str) -> str:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(
            client, scanned_pdf(sample_pages(1, lines=1)), webhook_url=webhook_url
        ).json()["id"]
        job, _ = wait_for(client, job_id)
    assert job["status"] == "succeeded"
    return job_id


def _delivery(service: Service, job_id: str) -> WebhookDelivery:
    with service.stack.sessions() as session:
        delivery = session.scalars(
            select(WebhookDelivery).where(WebhookDelivery.job_id == job_id)
        ).one()
        delivery.attempt_log  # noqa: B018 - load before the session closes
        return delivery


def test_server_errors_are_retried_until_delivered(service: Service) -> None:
    service.receiver.responses["/hooks/flaky"] = [500, 503, 200]
    job_id = _run_job(service, service.receiver.url("/hooks/flaky"))
    hooks = wait_until(
        lambda: (
            len(service.receiver.for_path("/hooks/flaky")) >= 3
            and service.receiver.for_path("/hooks/flaky")
        ),
        30,
        what="three attempts",
    )
    assert [h.headers[ATTEMPT_HEADER] for h in hooks] == ["1", "2", "3"]
    assert len({h.headers[EVENT_ID_HEADER] for h in hooks}) == 1
    wait_until(lambda: _delivery(service, job_id).status == "delivered", 10, what="delivered")
    log = _delivery(service, job_id).attempt_log
    assert [a.status_code for a in log] == [500, 503, 200]


def test_a_client_error_is_final(service: Service) -> None:
    service.receiver.responses["/hooks/gone"] = [410]
    job_id = _run_job(service, service.receiver.url("/hooks/gone"))
    wait_until(lambda: _delivery(service, job_id).status == "failed", 30, what="failed")
    time.sleep(2.5)  # longer than two backoffs: a retry would have arrived by now
    assert len(service.receiver.for_path("/hooks/gone")) == 1
    assert [a.status_code for a in _delivery(service, job_id).attempt_log] == [410]


def test_a_receiver_that_is_down_gets_the_event_when_it_comes_back(service: Service) -> None:
    port = free_port()
    late = WebhookReceiver(port=port)
    job_id = _run_job(service, late.url("/hooks/late"))  # the job finishes regardless
    wait_until(lambda: _delivery(service, job_id).attempts >= 1, 30, what="a first attempt")
    server = late.start()
    try:
        wait_until(lambda: late.for_path("/hooks/late"), 30, what="the late delivery")
        # The receiver records a request before it answers; the sender then commits the outcome.
        wait_until(lambda: _delivery(service, job_id).status == "delivered", 10, what="delivered")
    finally:
        server.shutdown()
    delivery = _delivery(service, job_id)
    assert delivery.attempt_log[0].status_code is None
    assert "ConnectError" in (delivery.attempt_log[0].error or "")


def _uocr(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [UOCR, *args], env={**os.environ, **service.stack.env}, capture_output=True, text=True
    )


def test_a_dead_letter_shows_in_the_status_and_an_operator_resends_it(service: Service) -> None:
    service.receiver.responses["/hooks/fixed-later"] = [410, 200]  # refused, then fixed
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(
            client,
            scanned_pdf(sample_pages(1, lines=1)),
            webhook_url=service.receiver.url("/hooks/fixed-later"),
        ).json()["id"]
        wait_for(client, job_id)
        wait_until(lambda: _delivery(service, job_id).status == "failed", 30, what="failed")
        webhook = client.get(f"/v1/jobs/{job_id}").json()["webhook"]
        assert (webhook["status"], webhook["attempts"], webhook["last_status_code"]) == (
            "failed",
            1,
            410,
        )
        listed = _uocr(service, "webhooks", "failed", "--tenant", tenant.tenant_name)
        assert listed.returncode == 0, listed.stderr
        assert webhook["event_id"] in listed.stdout and "last=410" in listed.stdout

        resent = _uocr(service, "webhooks", "resend", webhook["event_id"])
        assert resent.returncode == 0 and f"resent {webhook['event_id']}" in resent.stdout
        wait_until(lambda: _delivery(service, job_id).status == "delivered", 30, what="resent")
        hooks = service.receiver.for_path("/hooks/fixed-later")
        assert [h.headers[ATTEMPT_HEADER] for h in hooks] == ["1", "2"]
        assert {h.headers[EVENT_ID_HEADER] for h in hooks} == {webhook["event_id"]}  # same event
        assert client.get(f"/v1/jobs/{job_id}").json()["webhook"]["status"] == "delivered"

    again = _uocr(service, "webhooks", "resend", webhook["event_id"])
    assert again.returncode != 0 and "is delivered, not failed" in again.stderr
