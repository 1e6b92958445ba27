"""What /v1/batches takes and answers: many documents, the same options, followed as one."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from uocr_core.schemas.request_body import RequestBody

BatchStatus = Literal["open", "running", "succeeded", "failed", "canceled"]


class BatchDocument(RequestBody):
    """One document of the batch: an object in the tenant's inbox."""

    object_key: str = Field(max_length=1000)
    # A retry that sends the same key adds nothing (uocr submit derives it from the file).
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)
    source_name: str | None = Field(None, max_length=500, description="default: the key's name")


class BatchCreate(RequestBody):
    """Documents by key and/or every document under an inbox prefix; with neither, or with
    ``open``, the batch stays open: add documents with POST .../documents, then close it."""

    name: str | None = Field(None, max_length=200, examples=["box-17 (1998 contracts)"])
    documents: list[BatchDocument] = Field(default_factory=list, max_length=10_000)
    prefix: str | None = Field(None, max_length=1000, examples=["inbox/<tenant id>/box-17/"])
    open: bool = Field(False, description="keep accepting documents until closed")
    pages: str | None = Field(None, examples=["1-3,7"], description="for each document")
    priority: Literal["interactive", "backlog"] = "backlog"
    metadata: dict[str, Any] = Field(default_factory=dict)
    reuse_results: bool = Field(
        False, description="a document read before (same bytes, pages) takes those results"
    )
    webhook_url: str | None = Field(None, description="one signed event when all have settled")


class BatchDocumentsAdd(RequestBody):
    documents: list[BatchDocument] = Field(min_length=1, max_length=10_000)


class DocumentCounts(BaseModel):
    total: int
    waiting: int = Field(description="accepted, not yet admitted to the workers")
    queued: int
    running: int
    succeeded: int
    failed: int
    canceled: int


class PageCounts(BaseModel):
    total: int = Field(description="pages of the documents admitted so far")
    done: int
    failed: int
    flagged: int = Field(0, description="pages read with a warning worth a look")


class BatchPublic(BaseModel):
    id: str
    name: str | None
    status: BatchStatus
    priority: Literal["interactive", "backlog"]
    documents: DocumentCounts
    pages: PageCounts
    pages_per_minute: float | None = Field(description="over the last 10 minutes")
    estimated_finish_at: datetime | None
    metadata: dict[str, Any]
    created_at: datetime
    closed_at: datetime | None
    finished_at: datetime | None
    status_url: str
    jobs_url: str
    manifest_url: str


class BatchAdded(BaseModel):
    added: int = Field(description="new documents")
    existing: int = Field(description="already in the batch (same idempotency key)")
    job_ids: list[str] = Field(description="in the order of the documents sent")


class BatchList(BaseModel):
    batches: list[BatchPublic]
    next_cursor: str | None
