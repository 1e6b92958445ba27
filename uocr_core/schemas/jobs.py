"""What the HTTP API accepts and returns."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from uocr_core.contracts import PageResult
from uocr_core.schemas.request_body import RequestBody

JobStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
PageStatus = Literal["pending", "running", "succeeded", "failed", "canceled"]


class JobCreateFromObject(RequestBody):
    """Submit a document already uploaded to the bucket, under ``inbox/<tenant id>/``."""

    object_key: str
    pages: str | None = Field(None, examples=["1-3,7"])
    webhook_url: str | None = None
    priority: Literal["interactive", "backlog"] = "backlog"
    metadata: dict[str, Any] = Field(default_factory=dict)
    reuse_results: bool = Field(
        False, description="take an identical finished document's results (same bytes, pages)"
    )


class JobAccepted(BaseModel):
    id: str
    status: JobStatus
    status_url: str = Field(description="absolute; the same URL is in the Location header")
    pages_total: int


class PagePublic(BaseModel):
    page: int
    status: PageStatus
    attempts: int
    duration_ms: int | None
    error: str | None
    warnings: list[str]
    started_at: datetime | None
    finished_at: datetime | None
    model_version: str | None = Field(
        None, description="the model version whose worker produced the page (null until then)"
    )
    engine: str | None = Field(None, description="the engine that produced the page")
    confidence: float | None = Field(
        None, description="the engine's confidence in the page's text, 0-1 (null if it gives none)"
    )
    needs_review: bool = Field(
        False, description="on the review list: failed, read with a warning, or low confidence"
    )
    reviewed_at: datetime | None = None


class ReviewPagePublic(BaseModel):
    """A page on the review list, with what a reviewer needs to find it."""

    job_id: str
    page: int
    source: str | None = Field(None, description="the document's file name")
    batch_id: str | None
    status: PageStatus
    confidence: float | None
    warnings: list[str]
    error: str | None
    finished_at: datetime | None
    page_url: str = Field(description="the page's result (GET)")
    image_url: str = Field(description="the page's scan (GET)")
    review_url: str = Field(description="POST here to mark the page reviewed")


class ReviewList(BaseModel):
    pages: list[ReviewPagePublic]
    next_cursor: str | None


class JobSummary(BaseModel):
    """A job in a listing: its state without the per-page detail (GET the job for that)."""

    id: str
    status: JobStatus
    priority: Literal["interactive", "backlog"]
    source: str
    pages_total: int
    pages_done: int
    pages_failed: int
    pages_flagged: int = Field(
        0,
        description="pages read with a warning worth a look (repetition_loop, "
        "token_budget_exhausted, empty_page, repaired_file...): see each page's warnings",
    )
    metadata: dict[str, Any]
    created_at: datetime
    finished_at: datetime | None
    status_url: str
    results_expire_at: datetime | None = Field(
        description="when retention deletes the document and results; null: kept"
    )
    results_deleted_at: datetime | None
    batch_id: str | None = Field(None, description="the batch this document belongs to")
    idempotency_key: str | None = Field(
        None, description="the key it was submitted with (uocr submit derives it from the file)"
    )


class JobList(BaseModel):
    jobs: list[JobSummary]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null: last")


class WebhookPublic(BaseModel):
    """The job's completion event: whether the receiver has it (a failed one is kept and can be
    resent by an operator)."""

    event_id: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None


class JobPublic(JobSummary):
    engine: str
    model_version: str = Field(
        description="the model version the job was given at submit; it runs there to the end"
    )
    groups_total: int
    groups_done: int
    cancel_requested: bool
    error: str | None
    started_at: datetime | None
    result_url: str | None
    webhook: WebhookPublic | None
    reused_from: str | None = Field(
        None, description="the job whose results this one took (reuse_results): none was read"
    )
    pages: list[PagePublic] = Field(
        description="the pages `pages_listed` names: every page of a document of at most "
        "`status_pages_inline` (300) pages unless asked otherwise (`?pages=`)"
    )
    pages_listed: str | None = Field(
        None,
        description='which pages `pages` lists: "all", a range of page numbers ("301-600"), '
        "or null: none (a long document's status is a summary; follow `pages_next`)",
    )
    pages_next: str | None = Field(
        None, description="the status URL listing the next range of pages, while any remain"
    )


class ResultLink(BaseModel):
    url: str
    expires_in_seconds: int


class JobResult(BaseModel):
    """``result.json``: the document's pages in order, each as ``GET .../pages/{n}`` gives it."""

    job_id: str
    status: JobStatus
    source: str
    pages_total: int
    pages_failed: int
    pages_flagged: int = Field(0, description="pages read with a warning worth a look")
    metadata: dict[str, Any]
    model_version: str | None = Field(None, description="the job's model version")
    engine: str | None = None
    pages: list[PageResult]
