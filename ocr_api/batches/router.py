"""HTTP routes for batches. Thin: parse, call the service, shape the answer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile

from ocr_api.deps import ActorDep, StateDep, TenantDep, current_tenant
from ocr_api.jobs import presenters
from ocr_api.jobs.params import BatchIdDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, problems
from uocr_core import object_keys
from uocr_core.batches import service
from uocr_core.batches.progress import batch_public, manifest_lines
from uocr_core.errors import Conflict, Gone, InvalidRequest
from uocr_core.jobs import listing, upload_scan
from uocr_core.jobs import service as job_service
from uocr_core.jobs.downloads import record_download
from uocr_core.jobs.input_limits import check_form_fields, check_name, read_limited
from uocr_core.schemas.batches import (
    BatchAdded,
    BatchCreate,
    BatchDocument,
    BatchDocumentsAdd,
    BatchList,
    BatchPublic,
)
from uocr_core.schemas.jobs import JobList

router = APIRouter(
    prefix="/v1/batches",
    tags=["batches"],
    dependencies=[Depends(current_tenant), Depends(negotiation.known_query_only)],
    responses=COMMON_PROBLEMS,
)
_JSON_ONLY = [Depends(negotiation.accepts_json)]


@router.post(
    "",
    status_code=201,
    response_model=BatchPublic,
    dependencies=_JSON_ONLY,
    responses={
        201: {"headers": {"Location": {"description": "the batch's status URL"}}},
        **problems(404, 409, 413),
    },
)
def create(
    body: BatchCreate,
    response: Response,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
) -> BatchPublic:
    """Documents by key or every document under an inbox prefix (closed at once), or an open
    batch to add documents to. They wait in the database and are admitted as workers free."""
    batch, replayed = service.create_batch(
        sessions=state.sessions,
        store=state.store,
        settings=state.settings,
        tenant_id=tenant.id,
        body=body,
        idempotency_key=idempotency_key,
        actor=actor,
    )
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    state.dispatcher.enqueue_admission()
    with state.sessions() as session:
        public = batch_public(session, session.merge(batch), state.settings)
    response.headers["Location"] = public.status_url
    return public


@router.get("", response_model=BatchList, dependencies=_JSON_ONLY)
def list_batches(
    state: StateDep,
    tenant: TenantDep,
    limit: int = Query(20, ge=1, le=100),
    cursor: str | None = Query(None, max_length=500),
) -> BatchList:
    """This key's tenant's batches, newest first."""
    with state.sessions() as session:
        batches, next_cursor = service.list_batches(
            session, tenant_id=tenant.id, limit=limit, cursor=cursor
        )
        return BatchList(
            batches=[batch_public(session, b, state.settings) for b in batches],
            next_cursor=next_cursor,
        )


@router.get(
    "/{batch_id}", response_model=BatchPublic, dependencies=_JSON_ONLY, responses=problems(404)
)
def get_batch(batch_id: BatchIdDep, state: StateDep, tenant: TenantDep) -> BatchPublic:
    with state.sessions() as session:
        batch = service.get_batch(session, tenant_id=tenant.id, batch_id=batch_id)
        return batch_public(session, batch, state.settings)


@router.post(
    "/{batch_id}/documents",
    response_model=BatchAdded,
    dependencies=_JSON_ONLY,
    responses=problems(404, 409),
)
def add_documents(
    batch_id: BatchIdDep,
    body: BatchDocumentsAdd,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
) -> BatchAdded:
    """Add documents to an open batch; one sent again with the same idempotency key is not
    added twice (its job id is returned)."""
    added = service.add_documents(
        sessions=state.sessions,
        settings=state.settings,
        tenant_id=tenant.id,
        batch_id=batch_id,
        documents=body.documents,
        actor=actor,
    )
    state.dispatcher.enqueue_admission()
    return BatchAdded(added=added.added, existing=added.existing, job_ids=added.job_ids)


_FILES_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "additionalProperties": False,
                    "properties": {
                        "file": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "string", "format": "binary"},
                            "description": "one document per part: a PDF or a page image",
                        }
                    },
                }
            }
        },
    }
}


@router.post(
    "/{batch_id}/files",
    response_model=BatchAdded,
    openapi_extra=_FILES_DOC,
    dependencies=_JSON_ONLY,
    responses=problems(404, 409, 413),
)
async def add_files(
    request: Request, batch_id: BatchIdDep, state: StateDep, tenant: TenantDep, actor: ActorDep
) -> BatchAdded:
    """Add documents sent through the API (a browser cannot PUT to the bucket): each part is
    stored in the tenant's inbox and added, as POST .../documents adds an inbox object."""
    limit = state.settings.max_upload_bytes
    declared = int(request.headers.get("content-length") or 0)
    request._body = await read_limited(request.stream(), limit=limit + 64 * 1024, declared=declared)
    form = await request.form(max_files=1000, max_fields=5)
    check_form_fields(form, frozenset({"file"}))
    uploads = [item for item in form.getlist("file") if isinstance(item, UploadFile)]
    if not uploads:
        raise InvalidRequest("no document: send each as the multipart field 'file'")
    parts = [(check_name(item.filename or "document"), await item.read()) for item in uploads]
    for name, data in parts:  # every part before any is stored: one infected part refuses all
        await run_in_threadpool(
            upload_scan.check_upload, state.settings.upload_scan, name=name, data=data
        )
    documents = []
    for name, data in parts:
        key = object_keys.upload_key(tenant.id, name)
        await run_in_threadpool(state.store.put, key, data, "application/octet-stream")
        documents.append(BatchDocument(object_key=key, source_name=name))
    added = await run_in_threadpool(
        lambda: service.add_documents(
            sessions=state.sessions,
            settings=state.settings,
            tenant_id=tenant.id,
            batch_id=batch_id,
            documents=documents,
            actor=actor,
        )
    )
    state.dispatcher.enqueue_admission()
    return BatchAdded(added=added.added, existing=added.existing, job_ids=added.job_ids)


@router.post(
    "/{batch_id}/close",
    response_model=BatchPublic,
    dependencies=_JSON_ONLY,
    responses=problems(404),
)
def close(batch_id: BatchIdDep, state: StateDep, tenant: TenantDep) -> BatchPublic:
    """No more documents: the batch ends (manifest, webhook) when those it has settle."""
    service.close_batch(sessions=state.sessions, tenant_id=tenant.id, batch_id=batch_id)
    return get_batch(batch_id, state, tenant)


@router.post(
    "/{batch_id}/cancel",
    response_model=BatchPublic,
    status_code=202,
    dependencies=_JSON_ONLY,
    responses=problems(404, 409),
)
def cancel(
    batch_id: BatchIdDep, state: StateDep, tenant: TenantDep, actor: ActorDep
) -> BatchPublic:
    """Waiting documents are canceled now, running ones after their current page group."""
    for job_id in service.cancel_batch(
        sessions=state.sessions, tenant_id=tenant.id, batch_id=batch_id, actor=actor
    ):
        with suppress(Conflict, Gone):  # finished or deleted meanwhile: nothing to cancel
            job_service.cancel_job(
                state.sessions,
                state.dispatcher,
                state.settings,
                tenant_id=tenant.id,
                job_id=job_id,
                actor=actor,
            )
    return get_batch(batch_id, state, tenant)


@router.get(
    "/{batch_id}/jobs", response_model=JobList, dependencies=_JSON_ONLY, responses=problems(404)
)
def batch_jobs(
    batch_id: BatchIdDep,
    state: StateDep,
    tenant: TenantDep,
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=500),
) -> JobList:
    """The batch's documents as jobs, newest first, a page at a time."""
    with state.sessions() as session:
        service.get_batch(session, tenant_id=tenant.id, batch_id=batch_id)
        page = listing.list_jobs(
            session, tenant_id=tenant.id, batch_id=batch_id, limit=limit, cursor=cursor
        )
        jobs = [presenters.summary(job, state.settings) for job in page.jobs]
        return JobList(jobs=jobs, next_cursor=page.next_cursor)


@router.get(
    "/{batch_id}/manifest",
    response_model=None,
    responses={
        200: {
            "description": "One JSON object per document: input key, job id, status, pages, "
            "errors, result keys",
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        },
        **problems(404),
    },
)
def manifest(
    request: Request, batch_id: BatchIdDep, state: StateDep, tenant: TenantDep, actor: ActorDep
) -> StreamingResponse:
    """Written live from the database (a finished batch's is also in the bucket)."""
    negotiation.require(request, ["application/x-ndjson"])
    with state.sessions() as session:
        service.get_batch(session, tenant_id=tenant.id, batch_id=batch_id)
    record_download(state.sessions, actor=actor, target=batch_id, item="batch_manifest")

    def lines() -> Iterator[str]:
        with state.sessions() as session:
            yield from manifest_lines(session, batch_id)

    return StreamingResponse(lines(), media_type="application/x-ndjson; charset=utf-8")
