"""The schema: tenants and their keys, batches, jobs, pages, page groups, webhook deliveries,
the audit log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from uocr_core.db import Base, SearchDocument, UTCDateTime, utcnow


def new_id() -> str:
    return str(uuid.uuid4())


class Tenant(Base):
    __tablename__ = "tenants"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # Used to sign this tenant's webhooks; HMAC needs the secret itself, so it is not hashed.
    webhook_secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Unset: never expires. A rotated key keeps working until here, beside its successor.
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Batch(Base):
    """Many documents with one set of options; each document is a job with ``batch_id`` set."""

    __tablename__ = "batches"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        Index("ix_batches_tenant_listing", "tenant_id", "created_at", "id"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)  # open, running, then terminal
    priority: Mapped[str] = mapped_column(String(16))
    pages: Mapped[str | None] = mapped_column(String(500))  # the page range of each document
    reuse_results: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    webhook_url: Mapped[str | None] = mapped_column(Text)
    batch_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())  # no more documents
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


_WAITING = "admitted_at IS NULL AND status = 'queued'"
_RESULTS_KEPT = "results_deleted_at IS NULL AND deleted_at IS NULL"
_TO_REVIEW = "needs_review AND reviewed_at IS NULL"


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        Index("ix_jobs_tenant_listing", "tenant_id", "created_at", "id"),  # GET /v1/jobs pages
        Index("ix_jobs_batch_listing", "batch_id", "created_at", "id"),
        Index("ix_jobs_content", "tenant_id", "content_digest"),
        # What the feeder scans each round: only the waiting rows.
        Index(
            "ix_jobs_waiting",
            "tenant_id",
            "priority",
            "created_at",
            postgresql_where=text(_WAITING),
            sqlite_where=text(_WAITING),
        ),
        # What retention scans each hour: only jobs whose results are still kept, oldest first
        # (a database of 10^7 pages read the whole jobs table without it: docs/scaling.md).
        Index(
            "ix_jobs_retention",
            "finished_at",
            postgresql_where=text(_RESULTS_KEPT),
            sqlite_where=text(_RESULTS_KEPT),
        ),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    # Indexed by ix_jobs_tenant_listing, which leads with it (one index less to write).
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"))
    status: Mapped[str] = mapped_column(String(16), index=True)
    priority: Mapped[str] = mapped_column(String(16))
    engine: Mapped[str] = mapped_column(String(32))
    # The model version chosen at submit (uocr_core/model_versions.route): its page groups go
    # to that version's queues until the job ends, whatever the routing says later.
    model_version: Mapped[str] = mapped_column(
        String(64), default="default", server_default="default", index=True
    )
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # sha256 of the submitted files and options: a key reused for another request is refused.
    request_fingerprint: Mapped[str | None] = mapped_column(String(64))
    source_name: Mapped[str] = mapped_column(String(500))
    webhook_url: Mapped[str | None] = mapped_column(Text)
    job_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    page_count: Mapped[int] = mapped_column(Integer)
    pages_done: Mapped[int] = mapped_column(Integer, default=0)
    pages_failed: Mapped[int] = mapped_column(Integer, default=0)
    # Read, but with a warning a reader should look at (a repetition loop, a page over its
    # token budget, an empty page, a repaired file): such a job is not a clean success.
    pages_flagged: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("batches.id"))
    # sha256 of the document's bytes, the page range and the engine: what makes two jobs' results
    # the same (uocr_core/jobs/reuse.py); reused_from names the job whose results were taken.
    content_digest: Mapped[str | None] = mapped_column(String(64))
    reused_from: Mapped[str | None] = mapped_column(String(36))
    # Unset while the job waits in Postgres for the feeder (uocr_core/jobs/admission_service.py).
    admitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # A batch document not yet read: its inbox object and the page range to take from it.
    input_key: Mapped[str | None] = mapped_column(String(1000))
    page_selection: Mapped[str | None] = mapped_column(String(500))
    # Asked to take the results of an identical finished document instead of reading it again.
    reuse_results: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    # Set when retention deleted the document and its results; the record stays.
    results_deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Set by DELETE: the objects are gone and reads answer 410; the row stays as a tombstone.
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    deleted_by: Mapped[str | None] = mapped_column(String(200))
    pages: Mapped[list[Page]] = relationship(
        back_populates="job", order_by="Page.position", cascade="all, delete-orphan"
    )
    groups: Mapped[list[PageGroup]] = relationship(
        back_populates="job", order_by="PageGroup.group_index", cascade="all, delete-orphan"
    )
    webhook_deliveries: Mapped[list[WebhookDelivery]] = relationship(
        order_by="WebhookDelivery.created_at", viewonly=True
    )


class Page(Base):
    """One page of a job. ``page_no`` is the page's number in the submitted document."""

    __tablename__ = "pages"
    # Both lead with job_id: they index it (a row a page: each index more is written a page).
    __table_args__ = (
        UniqueConstraint("job_id", "page_no"),
        UniqueConstraint("job_id", "position"),
        # The review list, oldest first: only the pages still to review, however many pages.
        Index(
            "ix_pages_to_review",
            "finished_at",
            "id",
            postgresql_where=text(_TO_REVIEW),
            sqlite_where=text(_TO_REVIEW),
        ),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    page_no: Mapped[int] = mapped_column(Integer)
    source_key: Mapped[str] = mapped_column(String(500))
    source_index: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result_key: Mapped[str | None] = mapped_column(String(500))
    error: Mapped[str | None] = mapped_column(Text)
    warnings: Mapped[list[str]] = mapped_column(JSON, default=list)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    # What produced the result, as the worker that recorded it says (unset until then).
    model_version: Mapped[str | None] = mapped_column(String(64))
    engine: Mapped[str | None] = mapped_column(String(32))
    # The engine's confidence in the page (0-1), and whether a person should look at it: read
    # with a warning or below settings.review_confidence_below; then who looked, and when.
    confidence: Mapped[float | None] = mapped_column(Float)
    needs_review: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    reviewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reviewed_by: Mapped[str | None] = mapped_column(String(200))
    job: Mapped[Job] = relationship(back_populates="pages")


class PageGroup(Base):
    """A run of consecutive pages decoded together; the first ``overlap`` pages are context only."""

    __tablename__ = "page_groups"
    __table_args__ = (UniqueConstraint("job_id", "group_index"),)  # indexes job_id too
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    group_index: Mapped[int] = mapped_column(Integer)
    first_position: Mapped[int] = mapped_column(Integer)
    last_position: Mapped[int] = mapped_column(Integer)
    overlap: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    task_id: Mapped[str | None] = mapped_column(String(64))
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    job: Mapped[Job] = relationship(back_populates="groups")

    @property
    def num_pages(self) -> int:
        """Pages decoded in this group, context included (what its time limit grows with)."""
        return self.last_position - self.first_position + 1


class WebhookDelivery(Base):
    """An event stored before it is sent, so a receiver that is down never loses it."""

    __tablename__ = "webhook_deliveries"
    # What the reconciler scans each tick: only the deliveries still pending (the table keeps
    # every delivery ever made).
    __table_args__ = (
        Index(
            "ix_webhook_deliveries_pending",
            "created_at",
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    # A job's event, or a batch's (exactly one of the two is set).
    job_id: Mapped[str | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), index=True
    )
    batch_id: Mapped[str | None] = mapped_column(
        ForeignKey("batches.id", ondelete="CASCADE"), index=True
    )
    event_type: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Attempts made before an operator last resent it: the retry cap counts from here.
    attempts_before_resend: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempt_log: Mapped[list[WebhookAttempt]] = relationship(
        back_populates="delivery", order_by="WebhookAttempt.attempt_no"
    )

    @property
    def last_attempt(self) -> WebhookAttempt | None:
        return self.attempt_log[-1] if self.attempt_log else None


class WebhookAttempt(Base):
    __tablename__ = "webhook_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True
    )
    attempt_no: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer)
    delivery: Mapped[WebhookDelivery] = relationship(back_populates="attempt_log")


class AuditEvent(Base):
    """One key operation, for operators only. Append-only: the database refuses UPDATE and
    DELETE on this table (migration 0008), so rows are added with ``uocr_core.audit``."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_occurred_at", "occurred_at"),
        Index("ix_audit_events_tenant", "tenant_id", "occurred_at"),
        Index("ix_audit_events_action", "action", "occurred_at"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # "tenant:<name> key:<prefix>", "operator" or "worker:<host>"
    actor: Mapped[str] = mapped_column(String(200))
    # No foreign key: the record outlives what it names.
    tenant_id: Mapped[str | None] = mapped_column(String(36))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(200))
    request_id: Mapped[str | None] = mapped_column(String(128))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class PageText(Base):
    """A read page as search finds it (uocr_core/search): its words for Postgres' full-text
    index and its lines with their boxes, to show a hit on the scan. Written when the page is
    recorded, removed with the job's results (DELETE, retention). The tenant is on the row so
    one index, led by it, answers a tenant's query without reading another's pages."""

    __tablename__ = "page_texts"
    __table_args__ = (
        Index("ix_page_texts_search", "tenant_id", "document", postgresql_using="gin"),
    )
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    page_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(36))
    # tsvector on Postgres (migration 0014); the embedded run's SQLite keeps no search.
    document: Mapped[str] = mapped_column(SearchDocument())
    # [[text, x1, y1, x2, y2], ...] in the page's pixels, as read, top to bottom.
    lines: Mapped[list[list[Any]]] = mapped_column(JSON, default=list)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
