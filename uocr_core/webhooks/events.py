"""Webhook events (a job's, a batch's): stored as a delivery row before anything is sent."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from uocr_core.db import utcnow
from uocr_core.models import Job, WebhookDelivery, new_id
from uocr_core.settings import Settings
from uocr_core.urls import job_url


def record_job_finished(session: Session, job: Job, *, settings: Settings) -> str | None:
    """Store the job's terminal event; returns the delivery id, or None without a webhook URL."""
    if not job.webhook_url:
        return None
    return record_event(
        session,
        event_type=f"job.{job.status}",
        url=job.webhook_url,
        data={
            "job_id": job.id,
            "status": job.status,
            "pages_total": job.page_count,
            "pages_done": job.pages_done,
            "pages_failed": job.pages_failed,
            "pages_flagged": job.pages_flagged,
            "error": job.error,
            "status_url": job_url(settings, job.id),
            "result_url": job_url(settings, job.id, "/result"),
            "metadata": job.job_metadata,
        },
        job_id=job.id,
    )


def record_event(
    session: Session,
    *,
    event_type: str,
    url: str,
    data: dict[str, Any],
    job_id: str | None = None,
    batch_id: str | None = None,
) -> str:
    """The one envelope every event has (``id``, ``type``, ``created_at``, ``data``), stored as
    the exact bytes that are signed and sent; returns the delivery id."""
    event_id = new_id()
    body = {"id": event_id, "type": event_type, "created_at": utcnow().isoformat(), "data": data}
    session.add(
        WebhookDelivery(
            id=event_id,
            job_id=job_id,
            batch_id=batch_id,
            event_type=event_type,
            url=url,
            body=json.dumps(body, separators=(",", ":"), sort_keys=True),
        )
    )
    return event_id
