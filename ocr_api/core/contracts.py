"""Messages that cross processes: task names, queues, and the page result every engine produces."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# Task names are the contract between the API (which sends) and the workers (which run).
TASK_PAGE_GROUP = "ocr.page_group"
TASK_RECOVER = "ocr.recover_stale_groups"
TASK_DELIVER_WEBHOOK = "webhooks.deliver"
TASK_PURGE_EXPIRED = "ocr.purge_expired_results"
TASK_SWEEP_ORPHANS = "ocr.sweep_orphan_objects"

QUEUE_INTERACTIVE = "ocr.interactive"
QUEUE_BACKLOG = "ocr.backlog"
QUEUE_CONTROL = "control"

Priority = Literal["interactive", "backlog"]
PRIORITY_QUEUES: dict[str, str] = {"interactive": QUEUE_INTERACTIVE, "backlog": QUEUE_BACKLOG}


class Block(BaseModel):
    """A layout block: its label, its box in page pixels (x1, y1, x2, y2) and its text."""

    label: str
    bbox: tuple[float, float, float, float]
    text: str
    confidence: float | None = None


class PageResult(BaseModel):
    """One page's result; the same shape in the service and in ``uocr run``'s pages.jsonl."""

    page: int
    status: Literal["succeeded", "failed", "canceled"]
    text: str = ""
    markdown: str = ""
    blocks: list[Block] = Field(default_factory=list)
    width: int | None = None
    height: int | None = None
    error: str | None = None
    # A page that was cut by its token budget or caught looping is flagged here, never clean.
    warnings: list[str] = Field(default_factory=list)
    engine: str = ""
    duration_ms: int | None = None

    def to_jsonl_obj(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
