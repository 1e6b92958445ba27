"""The feeder: waiting jobs are released into the broker as in-flight work finishes.

Run by beat on the control queue (and after a submit). One feeder at a time (a Postgres
advisory lock); the choice of jobs is uocr_core/admission.py's plan. A batch document is
read, scanned and checked here, when admitted: a bad one fails as its own job, with the
reason; while the upload scanner is down, the round stops and the documents wait.
"""

from __future__ import annotations

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import job_lifecycle, model_versions
from uocr_core.admission import WaitingJob, plan_admission
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher, queue_group
from uocr_core.errors import DomainError, InfectedDocument, PayloadTooLarge, ScannerUnavailable
from uocr_core.jobs import reuse, upload_scan
from uocr_core.jobs.documents import inspect_file
from uocr_core.jobs.intake import PageRef, add_pages_and_groups, select_pages, store_inputs
from uocr_core.models import Job
from uocr_core.settings import Settings
from uocr_core.storage import ObjectNotFound, ObjectStore

FEEDER_LOCK = 0x756F6372  # "uocr": one feeder at a time across the deployment
log = structlog.get_logger(__name__)


def admit_waiting(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
) -> int:
    """One admission round; returns how many jobs it released."""
    engine = sessions.kw["bind"]
    locking = engine.dialect.name == "postgresql"  # the embedded run (SQLite) has one process
    with engine.connect() as lock:
        if locking and not lock.scalar(select(func.pg_try_advisory_lock(FEEDER_LOCK))):
            return 0  # another feeder is mid-round
        try:
            return _round(sessions, store, dispatcher, settings)
        finally:
            if locking:
                lock.execute(select(func.pg_advisory_unlock(FEEDER_LOCK)))
                lock.commit()


def _round(
    sessions: sessionmaker[Session], store: ObjectStore, dispatcher: Dispatcher, settings: Settings
) -> int:
    with sessions() as session:
        cap = settings.admission.tenant_max_in_flight
        plan = plan_admission(
            _waiting(session, cap),
            in_flight_by_tenant(session),
            window=settings.admission.window,
            tenant_cap=cap,
        )
    for done, job_id in enumerate(plan.job_ids):
        try:
            admit_job(
                sessions=sessions,
                store=store,
                dispatcher=dispatcher,
                settings=settings,
                job_id=job_id,
            )
        except ScannerUnavailable:
            # Each of the others would wait out the same timeout: they stay queued, unread,
            # and the next round (beat, every admission.interval_seconds) tries again.
            log.warning("admission.waiting_for_upload_scanner", admitted=done)
            return done
    return len(plan.job_ids)


def _waiting(session: Session, per_tenant: int) -> list[WaitingJob]:
    """The oldest waiting jobs of each tenant and priority, no more than it could admit."""
    ranked = (
        select(
            Job.id,
            Job.tenant_id,
            Job.priority,
            Job.created_at,
            func.row_number()
            .over(partition_by=(Job.tenant_id, Job.priority), order_by=(Job.created_at, Job.id))
            .label("rank"),
        )
        .where(Job.admitted_at.is_(None), Job.status == job_lifecycle.QUEUED)
        .subquery()
    )
    rows = session.execute(select(ranked).where(ranked.c.rank <= per_tenant)).all()
    return [WaitingJob(r.id, r.tenant_id, r.priority == "interactive", r.created_at) for r in rows]


def in_flight_by_tenant(session: Session) -> dict[str, int]:
    """Admitted, unfinished jobs per tenant: what fills the window."""
    rows = session.execute(
        select(Job.tenant_id, func.count())
        .where(Job.admitted_at.is_not(None), Job.status.in_(job_lifecycle.UNFINISHED))
        .group_by(Job.tenant_id)
    ).all()
    return {tenant: count for tenant, count in rows}


def has_room(session: Session, settings: Settings, tenant_id: str) -> bool:
    """Whether one more job of the tenant could be admitted now (the plan's two bounds)."""
    in_flight = in_flight_by_tenant(session)
    return (
        sum(in_flight.values()) < settings.admission.window
        and in_flight.get(tenant_id, 0) < settings.admission.tenant_max_in_flight
    )


def admit_job(
    *,
    sessions: sessionmaker[Session],
    store: ObjectStore,
    dispatcher: Dispatcher,
    settings: Settings,
    job_id: str,
) -> None:
    """Read and check a waiting document (if not yet), then queue its first page group (every
    group, when they may run in parallel). A job canceled meanwhile is left as it is."""
    with sessions() as session:
        job = session.get(Job, job_id)
        if job is None or job.admitted_at is not None or job.status != job_lifecycle.QUEUED:
            return
        identity = model_versions.result_identity(job.engine, job.model_version)
        intake = (job.input_key, job.source_name, job.page_selection) if not job.pages else None
    taken = _take_document(sessions, store, settings, job_id, identity, *intake) if intake else None
    if intake and taken is None:
        return  # refused: the job failed with the reason
    with transaction(sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.admitted_at is not None or job.status != job_lifecycle.QUEUED:
            return
        if taken is not None:
            pages, stored, digest = taken
            job.content_digest = digest
            add_pages_and_groups(session, job, pages, stored, settings)
            session.flush()
            session.refresh(job)
        if job.reuse_results:
            reuse.take_earlier_results(session, store, job)
        job.admitted_at = utcnow()
        parallel = model_versions.groups_in_parallel(settings, job.engine)  # the job's engine
        groups = job.groups if parallel else job.groups[:1]
        for group in groups:
            queue_group(dispatcher, group, priority=job.priority)


def _take_document(
    sessions: sessionmaker[Session],
    store: ObjectStore,
    settings: Settings,
    job_id: str,
    identity: str,
    key: str | None,
    name: str,
    spec: str | None,
) -> tuple[list[PageRef], list[str], str] | None:
    if key is None:
        _refuse(sessions, job_id, "the job has no document")
        return None
    try:
        if store.size(key) > settings.max_upload_bytes:
            raise PayloadTooLarge(
                f"{name} is larger than the {settings.max_upload_bytes}-byte upload limit"
            )
        data = store.get(key)
        upload_scan.check_upload(settings.upload_scan, name=name, data=data)
        inspected = [inspect_file(name, data)]
        pages = select_pages(inspected, spec, settings)
        digest = reuse.content_digest([inspected[0].data], pages=spec, engine=identity)
    except ObjectNotFound:
        _refuse(sessions, job_id, f"{key} is no longer in the inbox")
        return None
    except ScannerUnavailable:
        raise  # not the document's fault: it waits for the scanner
    except InfectedDocument as error:
        store.delete([key])  # never read again, and malware has no place in the bucket
        _refuse(sessions, job_id, f"{error.message}; {key} was deleted from your inbox")
        return None
    except DomainError as error:
        _refuse(sessions, job_id, error.message)
        return None
    return pages, store_inputs(store, job_id, inspected), digest


def _refuse(sessions: sessionmaker[Session], job_id: str, reason: str) -> None:
    with transaction(sessions) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is not None and job.status == job_lifecycle.QUEUED:
            job.error = reason
            job.admitted_at = utcnow()
            job_lifecycle.finish(job)  # no page: failed
