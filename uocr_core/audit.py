"""The audit log: who did what to which key, job, batch or delivery, for operators only.

Rows are added in the caller's session, so an audit row commits or rolls back with the change
it records. The table is append-only in the database itself (migration 0008): nothing here
updates or deletes, and the database refuses it if anything tries. No API route reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from uocr_core.models import AuditEvent


class Action(StrEnum):
    KEY_CREATED = "key.created"
    KEY_ROTATED = "key.rotated"
    KEY_REVOKED = "key.revoked"
    JOB_SUBMITTED = "job.submitted"
    JOB_SUBMIT_REFUSED = "job.submit_refused"  # recorded, then taken back: the broker was down
    JOB_CANCELED = "job.canceled"
    JOB_DELETED = "job.deleted"
    BATCH_DOCUMENTS_SUBMITTED = "batch.documents_submitted"
    BATCH_CANCELED = "batch.canceled"
    RESULT_DOWNLOADED = "result.downloaded"
    WEBHOOK_RESENT = "webhook.resent"
    PAGE_REVIEWED = "page.reviewed"
    WORKER_STARTED = "worker.started"


@dataclass(frozen=True)
class Actor:
    """Who acts: a tenant through one of its keys, an operator at the CLI, or a worker."""

    name: str
    tenant_id: str | None = None
    request_id: str | None = None

    @classmethod
    def tenant_key(
        cls, *, tenant_id: str, tenant_name: str, key_prefix: str, request_id: str | None
    ) -> Actor:
        return cls(f"tenant:{tenant_name} key:{key_prefix}", tenant_id, request_id or None)

    @classmethod
    def worker(cls, node_name: str) -> Actor:
        return cls(f"worker:{node_name}")


OPERATOR = Actor("operator")


def record(
    session: Session,
    actor: Actor,
    action: Action,
    *,
    target: str | None = None,
    tenant_id: str | None = None,
    **detail: Any,
) -> None:
    """Add one row to ``session``; ``tenant_id`` names whose key, job or delivery it was when
    the actor is no tenant (an operator rotating a tenant's key)."""
    session.add(
        AuditEvent(
            actor=actor.name,
            tenant_id=tenant_id or actor.tenant_id,
            action=action.value,
            target=target,
            request_id=actor.request_id,
            detail=detail,
        )
    )


@dataclass(frozen=True)
class AuditFilter:
    tenant_id: str | None = None
    action: str | None = None
    since: datetime | None = None
    limit: int = 100


def events(session: Session, query: AuditFilter) -> list[AuditEvent]:
    """The newest ``limit`` events that match, oldest first (read as a log is read)."""
    statement = select(AuditEvent)
    if query.tenant_id is not None:
        statement = statement.where(AuditEvent.tenant_id == query.tenant_id)
    if query.action is not None:
        statement = statement.where(AuditEvent.action == query.action)
    if query.since is not None:
        statement = statement.where(AuditEvent.occurred_at >= query.since)
    newest = statement.order_by(AuditEvent.occurred_at.desc(), AuditEvent.id.desc())
    return list(reversed(session.scalars(newest.limit(query.limit)).all()))
