"""A batch whose documents have all settled ends: its manifest is written to the bucket and its
signed webhook is recorded (and sent), once."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import job_lifecycle
from uocr_core.batches.progress import batch_public, manifest_lines
from uocr_core.batches.service import RUNNING
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher
from uocr_core.models import Batch, Job
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore
from uocr_core.webhooks.events import record_event


def manifest_key(batch_id: str) -> str:
    return f"batches/{batch_id}/manifest.jsonl"


def finish_settled_batches(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
) -> list[str]:
    """Closed batches with no unfinished document: finished now. Returns their ids."""
    unfinished = exists().where(Job.batch_id == Batch.id, Job.status.in_(job_lifecycle.UNFINISHED))
    with sessions() as session:
        ids = session.scalars(select(Batch.id).where(Batch.status == RUNNING, ~unfinished)).all()
    return [
        batch_id for batch_id in ids if _finish(sessions, store, dispatcher, settings, batch_id)
    ]


def _finish(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
    batch_id: str,
) -> bool:
    with transaction(sessions) as session:
        batch = session.get(Batch, batch_id, with_for_update=True)
        if batch is None or batch.status != RUNNING:
            return False  # another round finished it
        store.put(
            manifest_key(batch.id),
            "".join(manifest_lines(session, batch.id)).encode(),
            "application/x-ndjson; charset=utf-8",
        )
        succeeded = session.scalar(
            select(exists().where(Job.batch_id == batch.id, Job.status == job_lifecycle.SUCCEEDED))
        )
        batch.status = job_lifecycle.SUCCEEDED if succeeded else job_lifecycle.FAILED
        batch.finished_at = utcnow()
        delivery_id = _record_event(session, batch, settings)
    if delivery_id:
        dispatcher.enqueue_webhook(delivery_id=delivery_id)
    return True


def _record_event(session: Session, batch: Batch, settings: Settings) -> str | None:
    """``batch.succeeded`` / ``batch.failed``, signed and retried like the job events."""
    if not batch.webhook_url:
        return None
    public = batch_public(session, batch, settings)
    return record_event(
        session,
        event_type=f"batch.{batch.status}",
        url=batch.webhook_url,
        data={
            "batch_id": batch.id,
            "name": batch.name,
            "status": batch.status,
            "documents": public.documents.model_dump(),
            "pages": public.pages.model_dump(),
            "status_url": public.status_url,
            "manifest_url": public.manifest_url,
            "metadata": batch.batch_metadata,
        },
        batch_id=batch.id,
    )
