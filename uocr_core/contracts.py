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
TASK_ADMIT = "ocr.admit_waiting"  # the feeder: waiting jobs into the broker, batches finished

QUEUE_INTERACTIVE = "ocr.interactive"
QUEUE_BACKLOG = "ocr.backlog"
QUEUE_LONG = "ocr.long"  # documents of long_document_pages or more, whatever their priority
QUEUE_CONTROL = "control"
# In order of precedence: a worker on several takes from the first that has work (Redis
# "priority" order, uocr_core/celery_app.py). Long before backlog, so a long document's next
# group is never starved by an endless backlog; run a long pool apart to keep short ones moving.
OCR_QUEUES = (QUEUE_INTERACTIVE, QUEUE_LONG, QUEUE_BACKLOG)

Priority = Literal["interactive", "backlog"]
PRIORITY_QUEUES: dict[str, str] = {"interactive": QUEUE_INTERACTIVE, "backlog": QUEUE_BACKLOG}

# The model version a job runs on when none is named (and every job from before versions).
DEFAULT_MODEL_VERSION = "default"


def versioned_queue(queue: str, model_version: str) -> str:
    """An OCR queue of one model version: its workers take only its jobs. The implicit
    "default" version keeps the plain names, so a deployment without versions is unchanged."""
    if model_version == DEFAULT_MODEL_VERSION or queue not in OCR_QUEUES:
        return queue
    return f"{queue}.{model_version}"


def ocr_queues(model_version: str = DEFAULT_MODEL_VERSION) -> tuple[str, ...]:
    """A version's OCR queues, in order of precedence."""
    return tuple(versioned_queue(queue, model_version) for queue in OCR_QUEUES)


def page_group_queue(
    priority: str,
    *,
    document_pages: int,
    long_document_pages: int,
    model_version: str = DEFAULT_MODEL_VERSION,
) -> str:
    """Long documents have their own pool, so one never holds short ones behind it; each
    model version has its own queues, so a job stays on the version it was given."""
    base = QUEUE_LONG if document_pages >= long_document_pages else PRIORITY_QUEUES[priority]
    return versioned_queue(base, model_version)


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
    # Degrees clockwise the page was turned to read it (a sheet fed upside down or sideways):
    # width, height and every box are those of the page turned upright.
    rotation: Literal[0, 90, 180, 270] = 0
    error: str | None = None
    # A page that was cut by its token budget or caught looping is flagged here, never clean.
    warnings: list[str] = Field(default_factory=list)
    # How sure the engine is of the page's text, from 0 to 1 (the CPU engine: its lines' scores
    # weighted by their length); None where the engine gives none.
    confidence: float | None = None
    engine: str = ""
    model_version: str = ""  # the named model version whose worker produced the page
    duration_ms: int | None = None

    def to_jsonl_obj(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
