"""HTTP routes for jobs. Thin: parse, call the service, shape the answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from ocr_api.core import object_keys
from ocr_api.core.errors import InvalidRequest, NotFinished, NotFound, PayloadTooLarge
from ocr_api.core.job_lifecycle import TERMINAL
from ocr_api.core.models import Job
from ocr_api.core.storage import ObjectNotFound
from ocr_api.deps import AppState, StateDep, TenantDep
from ocr_api.jobs import listing, presenters, service
from ocr_api.jobs.input_limits import (
    check_metadata,
    check_name,
    check_text,
    parse_metadata,
    read_limited,
)
from ocr_api.jobs.schemas import (
    JobAccepted,
    JobCreateFromObject,
    JobList,
    JobPublic,
    ResultLink,
)

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_SUBMIT_DOC: dict[str, Any] = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "a PDF, or page images (PNG, JPEG, TIFF) in order",
                        },
                        "pages": {"type": "string", "example": "1-3,7"},
                        "webhook_url": {"type": "string"},
                        "priority": {"type": "string", "enum": ["interactive", "backlog"]},
                        "metadata": {"type": "string", "description": "a JSON object"},
                    },
                }
            },
            "application/json": {"schema": JobCreateFromObject.model_json_schema()},
        }
    }
}


@router.post("", status_code=202, response_model=JobAccepted, openapi_extra=_SUBMIT_DOC)
async def submit(
    request: Request,
    response: Response,
    state: StateDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobAccepted:
    settings = state.settings
    is_json = request.headers.get("content-type", "").startswith("application/json")
    # Counted as it streams: a chunked body declares no length. A JSON body carries only
    # options and metadata; a multipart one the document (plus room for its envelope).
    limit = (
        settings.max_metadata_bytes + 16 * 1024
        if is_json
        else settings.max_upload_bytes + 64 * 1024
    )
    declared = int(request.headers.get("content-length") or 0)
    request._body = await read_limited(request.stream(), limit=limit, declared=declared)
    if is_json:
        files, options = await _from_json(request, state, tenant.id)
    else:
        files, options = await _from_form(request, state)
    submitted = await run_in_threadpool(
        lambda: service.submit_job(
            sessions=state.sessions,
            store=state.store,
            dispatcher=state.dispatcher,
            settings=state.settings,
            tenant_id=tenant.id,
            files=files,
            options=options,
            idempotency_key=idempotency_key,
        )
    )
    if submitted.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    job = submitted.job
    return JobAccepted(
        id=job.id, status=job.status, status_url=f"/v1/jobs/{job.id}", pages_total=job.page_count
    )


async def _from_json(
    request: Request, state: AppState, tenant_id: str
) -> tuple[list[service.UploadedFile], service.JobOptions]:
    settings = state.settings
    try:
        body = JobCreateFromObject.model_validate_json(await request.body())
    except ValidationError as error:
        raise InvalidRequest(f"invalid JSON body: {error.errors()[0]['msg']}") from None
    check_name(body.object_key, what="object key")
    metadata = check_metadata(
        body.metadata,
        max_bytes=settings.max_metadata_bytes,
        max_depth=settings.max_metadata_depth,
    )
    upload = await run_in_threadpool(
        lambda: service.load_object_input(
            store=state.store,
            tenant_id=tenant_id,
            key=body.object_key,
            max_bytes=state.settings.max_upload_bytes,
        )
    )
    options = service.JobOptions(
        check_text(body.pages, what="pages"),
        check_text(body.webhook_url, what="webhook_url"),
        body.priority,
        metadata,
    )
    return [upload], options


async def _from_form(
    request: Request, state: AppState
) -> tuple[list[service.UploadedFile], service.JobOptions]:
    settings, limit = state.settings, state.settings.max_upload_bytes
    form = await request.form(max_files=1000, max_fields=20)
    files: list[service.UploadedFile] = []
    total = 0
    for item in form.getlist("file"):
        if not isinstance(item, UploadFile):
            raise InvalidRequest("'file' must be a file part")
        data = await item.read()
        total += len(data)
        if total > limit:
            raise PayloadTooLarge(f"upload exceeds the {limit}-byte limit")
        name = check_name(item.filename or f"file{len(files)}")
        files.append(service.UploadedFile(name, data))
    if not files:
        raise InvalidRequest("no document: send it as the multipart field 'file'")
    metadata = parse_metadata(
        str(form.get("metadata") or "{}"),
        max_bytes=settings.max_metadata_bytes,
        max_depth=settings.max_metadata_depth,
    )
    options = service.JobOptions(
        pages=_text(form.get("pages"), "pages"),
        webhook_url=_text(form.get("webhook_url"), "webhook_url"),
        priority=_text(form.get("priority"), "priority") or "backlog",
        metadata=metadata,
    )
    return files, options


def _text(value: object, what: str) -> str | None:
    return check_text(value, what=what) if isinstance(value, str) and value else None


@router.get("", response_model=JobList)
def list_jobs(
    state: StateDep,
    tenant: TenantDep,
    status: Literal["queued", "running", "succeeded", "failed", "canceled"] | None = None,
    limit: int = Query(20, ge=1, le=100),
    cursor: str | None = None,
) -> JobList:
    """This key's tenant's jobs, newest first."""
    with state.sessions() as session:
        page = listing.list_jobs(
            session, tenant_id=tenant.id, status=status, limit=limit, cursor=cursor
        )
        jobs = [presenters.summary(job, state.settings) for job in page.jobs]
        return JobList(jobs=jobs, next_cursor=page.next_cursor)


@router.get("/{job_id}", response_model=JobPublic)
def get_status(job_id: str, state: StateDep, tenant: TenantDep) -> JobPublic:
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        return presenters.public(job, state.settings)


@router.post("/{job_id}/cancel", response_model=JobPublic, status_code=202)
def cancel(job_id: str, state: StateDep, tenant: TenantDep) -> JobPublic:
    """Stop the job: a queued one at once, a running one after its current page group."""
    service.cancel_job(
        state.sessions, state.dispatcher, state.settings, tenant_id=tenant.id, job_id=job_id
    )
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        return presenters.public(job, state.settings)


@router.delete("/{job_id}", status_code=204)
def delete(job_id: str, state: StateDep, tenant: TenantDep) -> Response:
    """Cancel if needed, delete the document and every result; the record stays as a
    tombstone, and later reads answer 410."""
    service.delete_job(
        sessions=state.sessions,
        store=state.store,
        dispatcher=state.dispatcher,
        settings=state.settings,
        tenant_id=tenant.id,
        job_id=job_id,
        deleted_by=tenant.name,
    )
    return Response(status_code=204)


@router.get("/{job_id}/result", response_model=None)
def get_result(
    job_id: str,
    state: StateDep,
    tenant: TenantDep,
    format: Literal["json", "markdown", "text", "pdf", "hocr"] = Query("json"),
) -> Response:
    _finished_job(state, tenant.id, job_id)
    data = _result_object(state, job_id, format)
    return Response(data, media_type=object_keys.result_media_type(format))


@router.get("/{job_id}/result/link", response_model=ResultLink)
def get_result_link(
    job_id: str,
    state: StateDep,
    tenant: TenantDep,
    format: Literal["json", "markdown", "text", "jsonl", "pdf", "hocr"] = Query("json"),
) -> ResultLink:
    _finished_job(state, tenant.id, job_id)
    _result_object(state, job_id, format)  # a link to nothing would fail later, in the client
    url = state.store.presigned_url(object_keys.result_key(job_id, format))
    return ResultLink(url=url, expires_in_seconds=state.settings.s3.presign_seconds)


@router.get("/{job_id}/pages/{page_no}", response_model=None)
def get_page(job_id: str, page_no: int, state: StateDep, tenant: TenantDep) -> Response:
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        service.ensure_results_kept(job, state.settings)
        page = next((p for p in job.pages if p.page_no == page_no), None)
        if page is None:
            raise NotFound(f"job {job_id} has no page {page_no}")
        if page.result_key is None:
            raise NotFinished(f"page {page_no} is {page.status}; poll the job and retry")
    try:
        return Response(state.store.get(page.result_key), media_type="application/json")
    except ObjectNotFound:
        raise NotFinished(f"page {page_no} is not stored yet") from None


def _finished_job(state: AppState, tenant_id: str, job_id: str) -> Job:
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant_id, job_id=job_id)
    service.ensure_results_kept(job, state.settings)
    if job.status not in TERMINAL:
        raise NotFinished(f"job {job_id} is {job.status}; the result exists once it finishes")
    if job.pages_done == 0:
        raise NotFinished(f"job {job_id} is {job.status} and no page was processed: no result")
    return job


def _result_object(state: AppState, job_id: str, fmt: str) -> bytes:
    try:
        return state.store.get(object_keys.result_key(job_id, fmt))
    except ObjectNotFound:
        if fmt == "pdf":  # built after the text results, and only logged if it fails
            raise NotFound(
                f"job {job_id} has no searchable PDF; its other results are complete"
            ) from None
        raise
