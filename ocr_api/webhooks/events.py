"""Job events for webhooks: stored as a delivery row before anything is sent."""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from ocr_api.core.db import utcnow
from ocr_api.core.models import Job, WebhookDelivery, new_id
from ocr_api.core.settings import Settings
from ocr_api.core.urls import job_url


def record_job_finished(session: Session, job: Job, *, settings: Settings) -> str | None:
    """Store the job's terminal event; returns the delivery id, or None without a webhook URL."""
    if not job.webhook_url:
        return None
    event_id = new_id()
    body = {
        "id": event_id,
        "type": f"job.{job.status}",
        "created_at": utcnow().isoformat(),
        "data": {
            "job_id": job.id,
            "status": job.status,
            "pages_total": job.page_count,
            "pages_done": job.pages_done,
            "pages_failed": job.pages_failed,
            "error": job.error,
            "status_url": job_url(settings, job.id),
            "result_url": job_url(settings, job.id, "/result"),
            "metadata": job.job_metadata,
        },
    }
    delivery = WebhookDelivery(
        id=event_id,
        job_id=job.id,
        event_type=body["type"],
        url=job.webhook_url,
        body=json.dumps(body, separators=(",", ":"), sort_keys=True),
    )
    session.add(delivery)
    return event_id
