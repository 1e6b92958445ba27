"""Sending one webhook delivery attempt; each try is recorded, retries back off exponentially.

Timeouts, connection errors and 5xx are retried; 3xx and 4xx are final (the receiver said no).
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import structlog
from sqlalchemy.orm import Session, sessionmaker

from uocr_core.db import transaction, utcnow
from uocr_core.errors import InvalidRequest
from uocr_core.models import Batch, Job, Tenant, WebhookAttempt, WebhookDelivery
from uocr_core.settings import WebhookSettings
from uocr_core.webhooks.signing import ATTEMPT_HEADER, EVENT_ID_HEADER, SIGNATURE_HEADER, sign
from uocr_core.webhooks.url_policy import vet_webhook_url

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class AttemptOutcome:
    status: str  # delivered | retry | failed | skipped
    retry_in_seconds: float | None = None


def backoff_seconds(settings: WebhookSettings, attempt_no: int) -> float:
    return min(settings.backoff_max_seconds, settings.backoff_base_seconds * 2 ** (attempt_no - 1))


def attempt_delivery(
    sessions: sessionmaker[Session],
    client: httpx.Client,
    settings: WebhookSettings,
    *,
    delivery_id: str,
) -> AttemptOutcome:
    with sessions() as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        if delivery is None or delivery.status != "pending":
            return AttemptOutcome("skipped")  # already settled: a duplicate task
        tenant = session.get(Tenant, _tenant_of(session, delivery))
        assert tenant is not None
        url, body, secret = delivery.url, delivery.body.encode(), tenant.webhook_secret
        attempt_no = delivery.attempts + 1
        attempt_in_round = attempt_no - delivery.attempts_before_resend
    status_code, error, started = _post(
        client, settings, url, body, secret, delivery_id, attempt_no
    )
    outcome = _classify(settings, status_code, attempt_in_round)
    _record(sessions, delivery_id, attempt_no, status_code, error, started, outcome)
    log.info(
        "webhook.attempt",
        delivery_id=delivery_id,
        attempt=attempt_no,
        status_code=status_code,
        error=error,
        outcome=outcome.status,
    )
    return outcome


def _tenant_of(session: Session, delivery: WebhookDelivery) -> str | None:
    """The tenant whose secret signs the event: its job's, or its batch's."""
    owner = (
        session.get(Job, delivery.job_id)
        if delivery.job_id
        else session.get(Batch, delivery.batch_id)
    )
    return owner.tenant_id if owner else None


def _post(
    client: httpx.Client,
    settings: WebhookSettings,
    url: str,
    body: bytes,
    secret: str,
    delivery_id: str,
    attempt_no: int,
) -> tuple[int | None, str | None, float]:
    started = time.perf_counter()
    try:
        # Checked again at send time: DNS may have changed since the job was submitted; and
        # sent to the address checked, so it cannot change between the check and the connect.
        pinned = vet_webhook_url(url, allowed_private_hosts=settings.allowed_private_hosts)
    except InvalidRequest as refused:
        return 400, f"refused: {refused.message}", started
    # Behind an egress proxy the proxy connects, and TLS is checked against the name.
    send_to = url if _through_proxy(url) else pinned
    named = httpx.URL(url)
    headers = {
        "Host": named.netloc.decode("ascii"),  # IDNA-encoded, as httpx would have sent it
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(secret, body, int(time.time())),
        EVENT_ID_HEADER: delivery_id,
        ATTEMPT_HEADER: str(attempt_no),
        "User-Agent": "uocr-webhooks/1",
    }
    try:
        response = client.post(
            send_to,
            content=body,
            headers=headers,
            timeout=settings.timeout_seconds,
            follow_redirects=False,
            extensions={"sni_hostname": named.raw_host.decode("ascii")},  # TLS: the name
        )
        return response.status_code, None, started
    except Exception as error:  # whatever failed, the attempt is recorded and retried
        return None, f"{type(error).__name__}: {error}", started


def _through_proxy(url: str) -> bool:
    """Whether httpx sends ``url`` through a proxy set in the environment (HTTPS_PROXY...)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(parts.hostname or "")  # type: ignore[attr-defined]


def _classify(
    settings: WebhookSettings, status_code: int | None, attempt_no: int
) -> AttemptOutcome:
    if status_code is not None and 200 <= status_code < 300:
        return AttemptOutcome("delivered")
    retryable = status_code is None or status_code >= 500
    if retryable and attempt_no < settings.max_attempts:
        return AttemptOutcome("retry", backoff_seconds(settings, attempt_no))
    return AttemptOutcome("failed")


def _record(
    sessions: sessionmaker[Session],
    delivery_id: str,
    attempt_no: int,
    status_code: int | None,
    error: str | None,
    started: float,
    outcome: AttemptOutcome,
) -> None:
    with transaction(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        assert delivery is not None
        delivery.attempts = attempt_no
        session.add(
            WebhookAttempt(
                delivery_id=delivery_id,
                attempt_no=attempt_no,
                status_code=status_code,
                error=error,
                duration_ms=int((time.perf_counter() - started) * 1000),
            )
        )
        if outcome.status == "delivered":
            delivery.status, delivery.delivered_at = "delivered", utcnow()
        elif outcome.status == "failed":
            delivery.status = "failed"  # the dead letter: kept, visible, resendable by an operator
