"""Batches: many documents from a tenant's inbox, one set of options, followed as one.

Each document is an ordinary job that waits in Postgres (``admitted_at`` unset, its object
not yet read) until the feeder admits it (uocr_core/jobs/admission_service.py): creating a
100,000-document batch writes rows, reads no document and queues nothing in the broker.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import audit, job_lifecycle, object_keys
from uocr_core.db import transaction, utcnow
from uocr_core.errors import Conflict, InvalidRequest, NotFound
from uocr_core.jobs import routing
from uocr_core.jobs.documents import parse_page_selection
from uocr_core.jobs.input_limits import check_metadata, check_name, check_text
from uocr_core.jobs.listing import decode_cursor, encode_cursor
from uocr_core.models import Batch, Job, new_id
from uocr_core.schemas.batches import BatchCreate, BatchDocument
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore
from uocr_core.webhooks.url_policy import check_webhook_url

# What a prefix batch takes: the documents uocr reads, by name (the bytes are checked when the
# document is admitted, like any upload).
DOCUMENT_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff")
OPEN, RUNNING = "open", "running"


@dataclass(frozen=True)
class Added:
    job_ids: list[str]
    added: int
    existing: int


def create_batch(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    settings: Settings,
    tenant_id: str,
    body: BatchCreate,
    idempotency_key: str | None,
    actor: audit.Actor,
) -> tuple[Batch, bool]:
    """The batch and whether it was replayed (an earlier create with the same key)."""
    if idempotency_key and (earlier := _by_key(sessions, tenant_id, idempotency_key)):
        return earlier, True
    _check_options(body, settings)
    documents = list(body.documents)
    if body.prefix is not None:
        documents += _under_prefix(store, tenant_id, body.prefix)
    stays_open = body.open or not documents
    batch = Batch(
        id=new_id(),
        tenant_id=tenant_id,
        name=body.name,
        status=OPEN if stays_open else RUNNING,
        priority=body.priority,
        pages=body.pages,
        reuse_results=body.reuse_results,
        webhook_url=body.webhook_url,
        batch_metadata=body.metadata,
        idempotency_key=idempotency_key,
        closed_at=None if stays_open else utcnow(),
    )
    with transaction(sessions) as session:
        session.add(batch)
        session.flush()
        _add(session, batch, documents, settings, actor)
    return batch, False


def add_documents(
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    tenant_id: str,
    batch_id: str,
    documents: list[BatchDocument],
    actor: audit.Actor,
) -> Added:
    with transaction(sessions) as session:
        batch = get_batch(session, tenant_id=tenant_id, batch_id=batch_id, for_update=True)
        if batch.status != OPEN:
            raise Conflict(f"batch {batch_id} is {batch.status}: documents are added while open")
        return _add(session, batch, documents, settings, actor)


def close_batch(*, sessions: sessionmaker[Session], tenant_id: str, batch_id: str) -> None:
    """No more documents: the batch finishes when the ones it has settle."""
    with transaction(sessions) as session:
        batch = get_batch(session, tenant_id=tenant_id, batch_id=batch_id, for_update=True)
        if batch.status == OPEN:
            batch.status, batch.closed_at = RUNNING, utcnow()


def cancel_batch(
    *, sessions: sessionmaker[Session], tenant_id: str, batch_id: str, actor: audit.Actor
) -> list[str]:
    """Documents still waiting are canceled now; the ids of admitted, unfinished ones are
    returned for the caller to cancel as jobs (each after its current page group)."""
    with transaction(sessions) as session:
        batch = get_batch(session, tenant_id=tenant_id, batch_id=batch_id, for_update=True)
        if batch.status in job_lifecycle.TERMINAL:
            raise Conflict(f"batch {batch_id} already finished ({batch.status}); nothing to cancel")
        batch.status, batch.finished_at = job_lifecycle.CANCELED, utcnow()
        batch.closed_at = batch.closed_at or batch.finished_at
        unfinished = session.scalars(
            select(Job).where(Job.batch_id == batch.id, Job.status.in_(job_lifecycle.UNFINISHED))
        ).all()
        running = []
        for job in unfinished:
            if job.admitted_at is None:
                job_lifecycle.finish_canceled(job)
            else:
                running.append(job.id)
        # The running ones get their own job.canceled rows as the caller cancels them.
        audit.record(
            session,
            actor,
            audit.Action.BATCH_CANCELED,
            target=batch_id,
            waiting_canceled=len(unfinished) - len(running),
            running=len(running),
        )
        return running


def get_batch(
    session: Session, *, tenant_id: str, batch_id: str, for_update: bool = False
) -> Batch:
    """Another tenant's batch is reported exactly like a missing one."""
    batch = session.get(Batch, batch_id, with_for_update=for_update)
    if batch is None or batch.tenant_id != tenant_id:
        raise NotFound(f"batch {batch_id} not found")
    return batch


def _add(
    session: Session,
    batch: Batch,
    documents: list[BatchDocument],
    settings: Settings,
    actor: audit.Actor,
) -> Added:
    keys = [d.idempotency_key for d in documents if d.idempotency_key]
    known = (
        dict(
            session.execute(
                select(Job.idempotency_key, Job.id).where(
                    Job.tenant_id == batch.tenant_id, Job.idempotency_key.in_(keys)
                )
            ).all()
        )
        if keys
        else {}
    )
    job_ids, added = [], 0
    for document in documents:
        if document.idempotency_key in known:
            job_ids.append(known[document.idempotency_key])
            continue
        job = _waiting_job(session, batch, document, settings)
        session.add(job)
        if document.idempotency_key:
            known[document.idempotency_key] = job.id
        job_ids.append(job.id)
        added += 1
    if added:
        # One row per call, not per document (a batch may hold 100,000): its jobs carry its id.
        audit.record(
            session, actor, audit.Action.BATCH_DOCUMENTS_SUBMITTED, target=batch.id, added=added
        )
    return Added(job_ids, added, len(documents) - added)


def _waiting_job(
    session: Session, batch: Batch, document: BatchDocument, settings: Settings
) -> Job:
    key = check_name(document.object_key, what="object key")
    if not key.startswith(object_keys.inbox_prefix(batch.tenant_id)) or ".." in key:
        raise NotFound(
            f"object {key!r} is not in your inbox ({object_keys.inbox_prefix(batch.tenant_id)})"
        )
    job_id = new_id()
    version = routing.route_job(session, settings, job_id=job_id, tenant_id=batch.tenant_id)
    return Job(
        id=job_id,
        tenant_id=batch.tenant_id,
        batch_id=batch.id,
        status=job_lifecycle.QUEUED,
        priority=batch.priority,
        engine=version.engine,
        model_version=version.model_version,
        idempotency_key=document.idempotency_key,
        source_name=(document.source_name or key.rsplit("/", 1)[-1])[:500],
        input_key=key,
        page_selection=batch.pages,
        reuse_results=batch.reuse_results,
        job_metadata=batch.batch_metadata,
        page_count=0,
    )


def _under_prefix(store: ObjectStore, tenant_id: str, prefix: str | None) -> list[BatchDocument]:
    inbox = object_keys.inbox_prefix(tenant_id)
    if prefix is None or not prefix.startswith(inbox) or ".." in prefix:
        raise NotFound(f"prefix {prefix!r} is not in your inbox ({inbox})")
    keys = sorted(k for k in store.keys_under(prefix) if k.lower().endswith(DOCUMENT_SUFFIXES))
    if not keys:
        raise InvalidRequest(f"no PDF or page image under {prefix!r}")
    return [BatchDocument(object_key=key) for key in keys]


def _check_options(body: BatchCreate, settings: Settings) -> None:
    check_text(body.name, what="name")
    if body.pages:
        parse_page_selection(check_text(body.pages, what="pages"), 100_000)  # syntax only
    check_metadata(
        body.metadata, max_bytes=settings.max_metadata_bytes, max_depth=settings.max_metadata_depth
    )
    if body.webhook_url:
        check_webhook_url(
            check_text(body.webhook_url, what="webhook_url") or "",
            allowed_private_hosts=settings.webhooks.allowed_private_hosts,
        )


def _by_key(sessions: sessionmaker[Session], tenant_id: str, key: str) -> Batch | None:
    with sessions() as session:
        return session.scalar(
            select(Batch).where(Batch.tenant_id == tenant_id, Batch.idempotency_key == key)
        )


def list_batches(
    session: Session, *, tenant_id: str, limit: int, cursor: str | None
) -> tuple[list[Batch], str | None]:
    """Newest first, keyset-paged like the jobs listing."""
    query = select(Batch).where(Batch.tenant_id == tenant_id)
    if cursor is not None:
        created_at, batch_id = decode_cursor(cursor)
        query = query.where(
            or_(
                Batch.created_at < created_at,
                and_(Batch.created_at == created_at, Batch.id < batch_id),
            )
        )
    rows = session.scalars(
        query.order_by(Batch.created_at.desc(), Batch.id.desc()).limit(limit + 1)
    ).all()
    batches = list(rows[:limit])
    more = len(rows) > limit
    return batches, encode_cursor(batches[-1].created_at, batches[-1].id) if more else None
