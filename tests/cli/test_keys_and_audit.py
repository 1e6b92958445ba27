"""``uocr keys create --expires-in``, ``keys rotate``, ``keys list`` and ``uocr audit`` as an
operator runs them, on a real Postgres; bad input is one line and exit code 1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ocr_worker.embedded import InlineDispatcher
from tests.cli.conftest import uocr
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.factories import sample_pages, scanned_pdf
from uocr_core import audit
from uocr_core.db import transaction
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.models import WebhookDelivery
from uocr_core.tenants import authenticate


@pytest.fixture(scope="module")
def deployment(stack: Stack, service_urls: ServiceUrls) -> Iterator[Stack]:
    with deployment_without_workers(stack, service_urls) as own:
        yield own


def _fields(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def test_an_operator_creates_rotates_lists_and_audits_keys(deployment: Stack) -> None:
    env = deployment.env
    created = uocr("keys", "create", "--tenant", "archive", "--expires-in", "90d", env=env)
    assert created.returncode == 0, created.stderr
    old = _fields(created.stdout)
    assert old["expires_at"].endswith("Z") and old["expires_at"] != "never"
    prefix = old["api_key"][:12]

    rotated = uocr("keys", "rotate", prefix, "--overlap", "7d", env=env)
    assert rotated.returncode == 0, rotated.stderr
    new = _fields(rotated.stdout)
    assert new["api_key"] != old["api_key"]
    assert f"old_key={prefix}  works until " in rotated.stdout
    with deployment.sessions() as session:  # both keys open the tenant's door for now
        assert authenticate(session, old["api_key"]).tenant.name == "archive"
        assert authenticate(session, new["api_key"]).tenant.name == "archive"

    listed = uocr("keys", "list", "--tenant", "archive", env=env).stdout.splitlines()
    assert len(listed) == 2 and all("active, expires 20" in line for line in listed)
    assert listed[0].startswith(prefix)

    lines = uocr("audit", "--tenant", "archive", "--json", env=env).stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert [(e["action"], e["actor"], e["target"]) for e in events] == [
        ("key.created", "operator", prefix),
        ("key.rotated", "operator", prefix),
    ]
    assert events[1]["detail"]["successor"] == new["api_key"][:12]
    text = uocr("audit", "--action", "key.rotated", env=env)
    assert text.returncode == 0 and text.stdout.count("\n") == 1
    assert f"key.rotated  {prefix}  operator" in text.stdout
    assert old["api_key"] not in text.stdout + "".join(lines)  # the keys themselves never


def test_a_resent_webhook_is_in_the_audit_log_under_its_tenant(deployment: Stack) -> None:
    tenant = deployment.new_tenant()
    job = submit_job(
        sessions=deployment.sessions,
        store=deployment.store,
        dispatcher=InlineDispatcher(),  # the job stays queued: only its delivery matters here
        settings=deployment.settings,
        tenant_id=tenant.tenant_id,
        files=[UploadedFile("d.pdf", scanned_pdf(sample_pages(1, lines=1)))],
        options=JobOptions(),
        actor=audit.OPERATOR,
    ).job
    with transaction(deployment.sessions) as session:
        dead = WebhookDelivery(
            job_id=job.id,
            event_type="job.finished",
            url="https://hooks.example.org/x",
            body="{}",
            status="failed",
            attempts=6,
        )
        session.add(dead)
    resent = uocr("webhooks", "resend", dead.id, env=deployment.env)
    assert resent.returncode == 0, resent.stderr
    lines = uocr(
        "audit",
        "--tenant",
        tenant.tenant_name,
        "--action",
        "webhook.resent",
        "--json",
        env=deployment.env,
    ).stdout.splitlines()
    (event,) = [json.loads(line) for line in lines]
    assert (event["actor"], event["target"], event["tenant_id"]) == (
        "operator",
        dead.id,
        tenant.tenant_id,
    )
    assert event["detail"]["job_id"] == job.id and event["detail"]["attempts_before"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("keys", "create", "--tenant", "t", "--expires-in", "soon"),
            "error: --expires-in takes a positive number and a unit (s, m, h, d, w), "
            "like 90d or 12h; got 'soon'",
        ),
        (
            ("keys", "rotate", "uocr_abcdefg"),
            "error: no key with prefix 'uocr_abcdefg'; give the key's first 12 characters",
        ),
        (("audit", "--tenant", "nobody"), "error: --tenant: no tenant named 'nobody' (uocr "),
        (("audit", "--action", "key.stolen"), "error: --action: unknown action 'key.stolen'; "),
        (("audit", "--since", "yesterday"), "error: --since takes an ISO 8601 time like "),
    ],
    ids=lambda value: " ".join(value[:3]) if isinstance(value, tuple) else "",
)
def test_bad_input_is_one_line_naming_the_option(
    deployment: Stack, args: tuple[str, ...], message: str
) -> None:
    done = uocr(*args, env=deployment.env)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(message), line
