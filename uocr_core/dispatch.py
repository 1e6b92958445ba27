"""Enqueueing page-group tasks: over Celery in the service, in-process when embedded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from celery import Celery

from uocr_core.contracts import (
    DEFAULT_MODEL_VERSION,
    TASK_ADMIT,
    TASK_DELIVER_WEBHOOK,
    TASK_PAGE_GROUP,
    page_group_queue,
)
from uocr_core.db import utcnow
from uocr_core.models import PageGroup


class Dispatcher(Protocol):
    def enqueue_group(
        self,
        *,
        job_id: str,
        group_index: int,
        priority: str,
        group_pages: int,
        document_pages: int = 0,
        model_version: str = DEFAULT_MODEL_VERSION,
    ) -> str | None: ...

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None: ...


class CeleryDispatcher:
    def __init__(
        self, app: Celery, time_limit: Callable[[int], int], long_document_pages: int = 50
    ) -> None:
        self.app = app
        self.time_limit = time_limit  # seconds for a group of n pages
        self.long_document_pages = long_document_pages

    def enqueue_group(
        self,
        *,
        job_id: str,
        group_index: int,
        priority: str,
        group_pages: int,
        document_pages: int = 0,
        model_version: str = DEFAULT_MODEL_VERSION,
    ) -> str | None:
        hard = self.time_limit(group_pages)
        queue = page_group_queue(
            priority,
            document_pages=document_pages,
            long_document_pages=self.long_document_pages,
            model_version=model_version,
        )
        result = self.app.send_task(
            TASK_PAGE_GROUP,
            args=[job_id, group_index],
            queue=queue,
            time_limit=hard,
            soft_time_limit=max(1, hard - 15),
        )
        return str(result.id)

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None:
        self.app.send_task(TASK_DELIVER_WEBHOOK, args=[delivery_id], countdown=countdown)

    def enqueue_admission(self) -> None:
        """An admission round now (beat runs one every admission.interval_seconds anyway)."""
        self.app.send_task(TASK_ADMIT)


def queue_group(dispatcher: Dispatcher, group: PageGroup, *, priority: str) -> None:
    """Send a page group's task to its job's model version and record it on the row (the
    caller's transaction). Every path that queues a group comes here: submit, the feeder, the
    next group, the reconciler; so a job never changes version on the way."""
    group.task_id = dispatcher.enqueue_group(
        job_id=group.job_id,
        group_index=group.group_index,
        priority=priority,
        group_pages=group.num_pages,
        document_pages=group.job.page_count,
        model_version=group.job.model_version or DEFAULT_MODEL_VERSION,
    )
    group.enqueued_at = utcnow()
