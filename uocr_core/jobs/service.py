"""Submitting, reading, canceling and deleting jobs. Keyword-only functions, no framework code."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import audit, job_lifecycle, object_keys
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher, queue_group
from uocr_core.errors import (
    Conflict,
    Gone,
    InfectedDocument,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    ServiceUnavailable,
)
from uocr_core.jobs import admission_service, intake, reuse, routing, upload_scan
from uocr_core.jobs.documents import inspect_file
from uocr_core.models import Job, PageGroup, new_id
from uocr_core.search import index as search_index
from uocr_core.settings import Settings
from uocr_core.storage import ObjectNotFound, ObjectStore
from uocr_core.webhooks.events import record_job_finished
from uocr_core.webhooks.url_policy import check_webhook_url

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class UploadedFile:
    name: str
    data: bytes
    inbox_key: str | None = None  # the tenant's inbox object it was read from (a JSON submit)


@dataclass(frozen=True)
class JobOptions:
    pages: str | None = None
    webhook_url: str | None = None
    priority: str = "backlog"
    metadata: dict[str, Any] = field(default_factory=dict)
    reuse_results: bool = False  # take an identical finished document's results (reuse.py)


@dataclass(frozen=True)
class Submitted:
    job: Job
    replayed: bool  # True when an Idempotency-Key matched an earlier submit


def submit_job(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
    tenant_id: str,
    files: list[UploadedFile],
    options: JobOptions,
    actor: audit.Actor,
    idempotency_key: str | None = None,
) -> Submitted:
    """Validate, store the document, record the job, then queue its first page group (every
    group, when the engine lets them run in parallel). A retry with the same Idempotency-Key
    and the same request returns the first job; the key reused for another request is 409."""
    idempotency_key = idempotency_key or None  # "" is no key: never stored, never matched
    fingerprint = request_fingerprint(files, options) if idempotency_key else None
    if idempotency_key and (existing := _find_by_key(sessions, tenant_id, idempotency_key)):
        return _replayed(existing, idempotency_key, fingerprint)
    _check_options(options, settings)
    if options.priority == "interactive":
        _check_interactive_room(sessions, settings, tenant_id)
    _scan_uploads(store, settings, files)
    inspected = [inspect_file(upload.name, upload.data) for upload in files]
    if not inspected:
        raise InvalidRequest("no document: upload a file or name an object")
    page_refs = intake.select_pages(inspected, options.pages, settings)
    job_id = new_id()
    with sessions() as session:
        version = routing.route_job(session, settings, job_id=job_id, tenant_id=tenant_id)
    job = Job(
        id=job_id,
        tenant_id=tenant_id,
        status=job_lifecycle.QUEUED,
        priority=options.priority,
        engine=version.engine,
        model_version=version.model_version,
        idempotency_key=idempotency_key,
        request_fingerprint=fingerprint,
        source_name=", ".join(f.name for f in inspected)[:500],
        webhook_url=options.webhook_url,
        job_metadata=options.metadata,
        page_count=len(page_refs),
        content_digest=reuse.content_digest(
            [f.data for f in inspected], pages=options.pages, engine=version.result_identity
        ),
        reuse_results=options.reuse_results,
    )
    stored = intake.store_inputs(store, job.id, inspected)
    try:
        _insert_job(sessions, job, page_refs, stored, settings, actor)
    except Exception as error:
        store.delete(stored)
        # A concurrent submit with the same Idempotency-Key won the unique constraint.
        winner = idempotency_key and _find_by_key(sessions, tenant_id, idempotency_key)
        if isinstance(error, IntegrityError) and winner:
            return _replayed(winner, idempotency_key or "", fingerprint)
        raise
    reused = options.reuse_results and _take_earlier_results(sessions, store, job.id)
    if (
        reused
        or options.priority == "interactive"
        or _window_has_room(sessions, settings, tenant_id)
    ):
        parallel = version.parallel_groups
        _dispatch(sessions, store, dispatcher, job, stored, every_group=parallel, actor=actor)
    # Otherwise the job waits in Postgres, accepted, and the feeder admits it in its turn.
    return Submitted(job, replayed=False)


def request_fingerprint(files: list[UploadedFile], options: JobOptions) -> str:
    """What makes two submits the same request: the files (names, bytes, order) and every
    option. Lengths go before contents so no two different requests hash alike."""
    digest = hashlib.sha256()
    for upload in files:
        name = upload.name.encode()
        digest.update(b"%d:%s%d:" % (len(name), name, len(upload.data)))
        digest.update(upload.data)
    chosen = {
        "pages": options.pages,
        "webhook_url": options.webhook_url,
        "priority": options.priority,
        "metadata": options.metadata,
        "reuse_results": options.reuse_results,
    }
    digest.update(json.dumps(chosen, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()


def _replayed(job: Job, key: str, fingerprint: str | None) -> Submitted:
    # A job submitted before fingerprints were stored cannot be compared: replayed as before.
    if job.request_fingerprint is not None and job.request_fingerprint != fingerprint:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for a different request (job {job.id}); "
            "use a new key for a new document or new options"
        )
    if job.deleted_at is not None:  # its tombstone keeps the key: a new submit needs a new one
        raise Conflict(
            f"Idempotency-Key {key!r} was used for job {job.id}, deleted on "
            f"{job.deleted_at:%Y-%m-%d at %H:%M:%S} UTC; use a new key to submit it again"
        )
    return Submitted(job, replayed=True)


def _scan_uploads(store: ObjectStore, settings: Settings, files: list[UploadedFile]) -> None:
    """Before the bytes are parsed or stored. An infected inbox object is deleted too: uocr
    will never read it, and a bucket is no place to keep malware."""
    for upload in files:
        try:
            upload_scan.check_upload(settings.upload_scan, name=upload.name, data=upload.data)
        except InfectedDocument as error:
            if upload.inbox_key is None:
                raise
            store.delete([upload.inbox_key])
            raise InfectedDocument(
                f"{error.message}; {upload.inbox_key} was deleted from your inbox",
                signature=error.signature,
            ) from None


def _check_options(options: JobOptions, settings: Settings) -> None:
    if options.priority not in ("interactive", "backlog"):
        raise InvalidRequest("priority must be 'interactive' or 'backlog'")
    if options.webhook_url:
        check_webhook_url(
            options.webhook_url, allowed_private_hosts=settings.webhooks.allowed_private_hosts
        )


def _take_earlier_results(sessions: sessionmaker[Session], store: ObjectStore, job_id: str) -> bool:
    with transaction(sessions) as session:
        job = session.get_one(Job, job_id, with_for_update=True)
        return reuse.take_earlier_results(session, store, job)


def _check_interactive_room(
    sessions: sessionmaker[Session], settings: Settings, tenant_id: str
) -> None:
    """Interactive submits fail fast (429) past queue_max_size queued of the tenant's own:
    another tenant's backlog, which waits in Postgres, never fills it."""
    with sessions() as session:
        queued = session.scalar(
            select(func.count())
            .select_from(Job)
            .where(
                Job.tenant_id == tenant_id,
                Job.priority == "interactive",
                Job.status == job_lifecycle.QUEUED,
                Job.deleted_at.is_(None),
            )
        )
    if (queued or 0) >= settings.queue_max_size:
        raise QueueFull(
            f"the queue is full ({queued} of your interactive jobs waiting, limit "
            f"{settings.queue_max_size}); retry later",
            retry_after_seconds=30,
        )


def _window_has_room(sessions: sessionmaker[Session], settings: Settings, tenant_id: str) -> bool:
    """A backlog submit goes straight to the broker while the tenant is under its share and
    the window has room (uocr_core/admission.py); else it waits for the feeder."""
    with sessions() as session:
        return admission_service.has_room(session, settings, tenant_id)


def _insert_job(
    sessions: sessionmaker[Session],
    job: Job,
    pages: list[intake.PageRef],
    stored: list[str],
    settings: Settings,
    actor: audit.Actor,
) -> None:
    with transaction(sessions) as session:
        session.add(job)
        intake.add_pages_and_groups(session, job, pages, stored, settings)
        audit.record(
            session,
            actor,
            audit.Action.JOB_SUBMITTED,
            target=job.id,
            source=job.source_name[:200],
            pages=job.page_count,
            priority=job.priority,
        )


def _dispatch(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    job: Job,
    stored_keys: list[str],
    *,
    every_group: bool,
    actor: audit.Actor,
) -> None:
    """Queue the first group, or every group when they may run in parallel; the pipeline
    queues the rest one by one as groups finish. No broker: the job is taken back."""
    try:
        with transaction(sessions) as session:
            session.get_one(Job, job.id).admitted_at = utcnow()
            query = select(PageGroup).where(PageGroup.job_id == job.id)
            if not every_group:
                query = query.where(PageGroup.group_index == 0)
            for group in session.scalars(query.order_by(PageGroup.group_index)):
                queue_group(dispatcher, group, priority=job.priority)
    except Exception:
        # Outside the failed transaction (a delete inside it was rolled back with it). If this
        # fails too, the reconciler dispatches the job once the broker is back, and the orphan
        # sweep catches objects left behind.
        discard_job(sessions, store, job.id, stored_keys, actor=actor)
        raise ServiceUnavailable("the task queue is unreachable; nothing was kept") from None


def discard_job(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    job_id: str,
    stored_keys: list[str],
    *,
    actor: audit.Actor,
) -> None:
    """Remove a refused submit's job row (pages and groups cascade) and its objects. Its
    audit row stays (append-only): a second one says the submit was taken back."""
    with transaction(sessions) as session:
        session.execute(delete(Job).where(Job.id == job_id))
        audit.record(
            session, actor, audit.Action.JOB_SUBMIT_REFUSED, target=job_id, reason="broker down"
        )
    store.delete(stored_keys)


def _find_by_key(sessions: sessionmaker[Session], tenant_id: str, key: str) -> Job | None:
    with sessions() as session:
        return session.scalar(
            select(Job).where(Job.tenant_id == tenant_id, Job.idempotency_key == key)
        )


def load_object_input(
    *, store: ObjectStore, tenant_id: str, key: str, max_bytes: int
) -> UploadedFile:
    """A JSON submit names an object the tenant uploaded into its own inbox prefix."""
    if not key.startswith(object_keys.inbox_prefix(tenant_id)) or ".." in key:
        raise NotFound(
            f"object {key!r} not found in your inbox ({object_keys.inbox_prefix(tenant_id)})"
        )
    try:
        if store.size(key) > max_bytes:
            raise PayloadTooLarge(
                f"object {key!r} is larger than the {max_bytes}-byte upload limit"
            )
        return UploadedFile(name=key.rsplit("/", 1)[-1], data=store.get(key), inbox_key=key)
    except ObjectNotFound:
        raise NotFound(f"object {key!r} not found") from None


def get_job(session: Session, *, tenant_id: str, job_id: str, for_update: bool = False) -> Job:
    """Another tenant's job is reported exactly like a missing one: 404. A deleted one is 410,
    for every read and action: its tombstone says when and by whom."""
    job = session.get(Job, job_id, with_for_update=for_update)
    if job is None or job.tenant_id != tenant_id:
        raise NotFound(f"job {job_id} not found")
    ensure_not_deleted(job)
    return job


def ensure_not_deleted(job: Job) -> None:
    if job.deleted_at is not None:
        raise Gone(
            f"job {job.id} was deleted on {job.deleted_at:%Y-%m-%d at %H:%M:%S} UTC by "
            f"{job.deleted_by}; its document and results are gone"
        )


def ensure_results_kept(job: Job, settings: Settings) -> None:
    """A job past retention keeps its record; asking for its results says why they are gone."""
    if job.results_deleted_at is not None:
        raise Gone(
            f"job {job.id}'s document and results were deleted on "
            f"{job.results_deleted_at:%Y-%m-%d}, {settings.result_retention_days:g} days after "
            "it finished (result_retention_days)"
        )


def cancel_job(
    sessions: sessionmaker[Session],
    dispatcher: Dispatcher,
    settings: Settings,
    *,
    tenant_id: str,
    job_id: str,
    actor: audit.Actor,
) -> None:
    """A queued job is canceled now (and its webhook sent); a running one after its group (asked
    again: the same answer). A finished job has nothing to cancel: 409."""
    delivery_id = None
    with transaction(sessions) as session:
        # Locked, as the workers lock it, so a claim or a finish in flight is not overwritten.
        job = get_job(session, tenant_id=tenant_id, job_id=job_id, for_update=True)
        if job.status in job_lifecycle.TERMINAL:
            raise Conflict(f"job {job_id} already finished ({job.status}); nothing to cancel")
        was = job.status
        job_lifecycle.request_cancel(job)
        audit.record(session, actor, audit.Action.JOB_CANCELED, target=job_id, status_was=was)
        if job.status == job_lifecycle.CANCELED:
            delivery_id = record_job_finished(session, job, settings=settings)
    if delivery_id:
        dispatcher.enqueue_webhook(delivery_id=delivery_id)


def delete_job(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
    tenant_id: str,
    job_id: str,
    deleted_by: str,
    actor: audit.Actor,
) -> None:
    """Cancel the job if it is unfinished (a running one stops after its group, and its worker
    records nothing), delete its document and every result, keep the record as a tombstone.
    No webhook: the client asked to forget the job, and its status URL answers 410."""
    # dispatcher and settings are unused: nothing is queued (a queued job's message finds the
    # job finished) and no webhook is sent.
    with transaction(sessions) as session:
        job = get_job(session, tenant_id=tenant_id, job_id=job_id, for_update=True)
        was = job.status
        job_lifecycle.delete(job, deleted_by=deleted_by)
        search_index.forget_jobs(session, [job_id])  # no longer found, from this commit on
        audit.record(session, actor, audit.Action.JOB_DELETED, target=job_id, status_was=was)
    # After the commit: a worker writing from now on finds the tombstone and removes what it
    # wrote, and whatever it writes before is listed here.
    try:
        store.delete(store.keys_under(object_keys.job_prefix(job_id)))
    except Exception as error:  # the store is down: the orphan sweep deletes them later
        log.warning("job.delete_objects_failed", job_id=job_id, error=str(error))
    log.info("job.deleted", job_id=job_id, deleted_by=deleted_by)
