"""Jobs as the API shows them: the listing's summary and the full status."""

from __future__ import annotations

from datetime import datetime, timedelta

from uocr_core.job_lifecycle import TERMINAL
from uocr_core.jobs.page_listing import ListedPages
from uocr_core.models import Job
from uocr_core.schemas.jobs import JobPublic, JobSummary, PagePublic, WebhookPublic
from uocr_core.settings import Settings
from uocr_core.urls import job_url


def _expires_at(job: Job, settings: Settings) -> datetime | None:
    if job.finished_at is None or job.results_deleted_at or not settings.result_retention_days:
        return None
    return job.finished_at + timedelta(days=settings.result_retention_days)


def summary(job: Job, settings: Settings) -> JobSummary:
    return JobSummary(
        id=job.id,
        status=job.status,
        priority=job.priority,
        source=job.source_name,
        pages_total=job.page_count,
        pages_done=job.pages_done,
        pages_failed=job.pages_failed,
        pages_flagged=job.pages_flagged,
        metadata=job.job_metadata,
        created_at=job.created_at,
        finished_at=job.finished_at,
        status_url=job_url(settings, job.id),
        results_expire_at=_expires_at(job, settings),
        results_deleted_at=job.results_deleted_at,
        batch_id=job.batch_id,
        idempotency_key=job.idempotency_key,
    )


def _webhook(job: Job) -> WebhookPublic | None:
    if not job.webhook_deliveries:
        return None
    delivery = job.webhook_deliveries[-1]
    last = delivery.last_attempt
    return WebhookPublic(
        event_id=delivery.id,
        status=delivery.status,
        attempts=delivery.attempts,
        last_status_code=last.status_code if last else None,
        last_error=last.error if last else None,
        delivered_at=delivery.delivered_at,
    )


def public(job: Job, settings: Settings, listed: ListedPages) -> JobPublic:
    following = listed.next_range
    next_url = None
    if following is not None:
        next_url = job_url(settings, job.id, f"?pages={following[0]}-{following[1]}")
    return JobPublic(
        **summary(job, settings).model_dump(),
        engine=job.engine,
        model_version=job.model_version,
        groups_total=listed.groups_total,
        groups_done=listed.groups_done,
        cancel_requested=job.cancel_requested,
        error=job.error,
        started_at=job.started_at,
        result_url=job_url(settings, job.id, "/result") if job.status in TERMINAL else None,
        webhook=_webhook(job),
        reused_from=job.reused_from,
        pages=[
            PagePublic(
                page=p.page_no,
                status=p.status,
                attempts=p.attempts,
                duration_ms=p.duration_ms,
                error=p.error,
                warnings=p.warnings,
                started_at=p.started_at,
                finished_at=p.finished_at,
                model_version=p.model_version,
                engine=p.engine,
                confidence=p.confidence,
                needs_review=p.needs_review,
                reviewed_at=p.reviewed_at,
            )
            for p in listed.pages
        ],
        pages_listed=listed.listed,
        pages_next=next_url,
    )
