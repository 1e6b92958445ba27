"""Dead letters: deliveries that ran out of retries or that the receiver refused. They are kept;
an operator lists them and, once the receiver is fixed, resends them. A resent delivery is the
same event (id, body, signature scheme) with a fresh set of retries, so a receiver that
deduplicates on the event id stays safe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from uocr_core import audit
from uocr_core.errors import InvalidRequest
from uocr_core.models import Batch, Job, Tenant, WebhookDelivery


@dataclass(frozen=True)
class DeadLetter:
    delivery_id: str
    job_id: str | None  # a job's event, or
    batch_id: str | None  # a batch's
    tenant_name: str
    event_type: str
    url: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: datetime


def dead_letters(session: Session, *, tenant_name: str | None = None) -> list[DeadLetter]:
    query = (
        select(WebhookDelivery, Tenant.name)
        .outerjoin(Job, Job.id == WebhookDelivery.job_id)
        .outerjoin(Batch, Batch.id == WebhookDelivery.batch_id)
        .join(Tenant, Tenant.id == func.coalesce(Job.tenant_id, Batch.tenant_id))
        .where(WebhookDelivery.status == "failed")
        .order_by(WebhookDelivery.created_at)
    )
    if tenant_name is not None:
        query = query.where(Tenant.name == tenant_name)
    letters = []
    for delivery, name in session.execute(query).all():
        last = delivery.last_attempt
        letters.append(
            DeadLetter(
                delivery.id,
                delivery.job_id,
                delivery.batch_id,
                name,
                delivery.event_type,
                delivery.url,
                delivery.attempts,
                last.status_code if last else None,
                last.error if last else None,
                delivery.created_at,
            )
        )
    return letters


def mark_for_resend(
    session: Session, delivery_ids: list[str], *, actor: audit.Actor = audit.OPERATOR
) -> list[str]:
    """Put failed deliveries back to pending with a fresh set of retries; the caller queues
    them once this commits. Anything but a failed delivery is refused, naming it."""
    deliveries = []
    for delivery_id in delivery_ids:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        if delivery is None:
            raise InvalidRequest(f"no webhook delivery {delivery_id}")
        if delivery.status != "failed":
            raise InvalidRequest(f"webhook delivery {delivery_id} is {delivery.status}, not failed")
        deliveries.append(delivery)
    for delivery in deliveries:
        delivery.status = "pending"
        delivery.attempts_before_resend = delivery.attempts
        audit.record(
            session,
            actor,
            audit.Action.WEBHOOK_RESENT,
            target=delivery.id,
            tenant_id=_tenant_of(session, delivery),
            event_type=delivery.event_type,
            job_id=delivery.job_id,
            batch_id=delivery.batch_id,
            attempts_before=delivery.attempts,
        )
    return [d.id for d in deliveries]


def _tenant_of(session: Session, delivery: WebhookDelivery) -> str | None:
    owner = (
        session.get(Job, delivery.job_id)
        if delivery.job_id
        else session.get(Batch, delivery.batch_id or "")
    )
    return None if owner is None else owner.tenant_id
