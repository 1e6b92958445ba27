"""Enqueueing page-group tasks: over Celery in the service, in-process when embedded."""

from __future__ import annotations

from typing import Protocol

from celery import Celery

from ocr_api.core.contracts import PRIORITY_QUEUES, TASK_DELIVER_WEBHOOK, TASK_PAGE_GROUP
from ocr_api.core.settings import WorkerSettings


class Dispatcher(Protocol):
    def enqueue_group(
        self, *, job_id: str, group_index: int, priority: str, group_pages: int
    ) -> str | None: ...

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None: ...


def group_time_limit(settings: WorkerSettings, group_pages: int) -> int:
    """Hard limit for one page group; it grows with the group's page count."""
    return settings.group_time_limit_base_seconds + (
        settings.group_time_limit_per_page_seconds * group_pages
    )


class CeleryDispatcher:
    def __init__(self, app: Celery, settings: WorkerSettings) -> None:
        self.app = app
        self.settings = settings

    def enqueue_group(
        self, *, job_id: str, group_index: int, priority: str, group_pages: int
    ) -> str | None:
        hard = group_time_limit(self.settings, group_pages)
        result = self.app.send_task(
            TASK_PAGE_GROUP,
            args=[job_id, group_index],
            queue=PRIORITY_QUEUES[priority],
            time_limit=hard,
            soft_time_limit=max(1, hard - 15),
        )
        return str(result.id)

    def enqueue_webhook(self, *, delivery_id: str, countdown: float = 0) -> None:
        self.app.send_task(TASK_DELIVER_WEBHOOK, args=[delivery_id], countdown=countdown)
