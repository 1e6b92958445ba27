"""HTTP routes for jobs. Thin: parse, call the service, shape the answer."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from ocr_api.deps import ActorDep, AppState, StateDep, TenantDep, current_tenant
from ocr_api.jobs import presenters
from ocr_api.jobs.params import JobIdDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, problems
from uocr_core import urls
from uocr_core.errors import InvalidRequest, PayloadTooLarge
from uocr_core.jobs import listing, page_listing, service
from uocr_core.jobs.input_limits import (
    check_form_fields,
    check_metadata,
    check_name,
    check_text,
    parse_metadata,
    read_limited,
)
from uocr_core.schemas.jobs import JobAccepted, JobCreateFromObject, JobList, JobPublic

router = APIRouter(
    prefix="/v1/jobs",
    tags=["jobs"],
    dependencies=[Depends(current_tenant), Depends(negotiation.known_query_only)],
    responses=COMMON_PROBLEMS,
)
_JSON_ONLY = [Depends(negotiation.accepts_json)]

_SUBMIT_DOC: dict[str, Any] = {
    "requestBody": {
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
                            "description": "a PDF, or page images (PNG, JPEG, TIFF) in order",
                        },
                        "pages": {"type": "string", "example": "1-3,7"},
                        "webhook_url": {"type": "string"},
                        "priority": {"type": "string", "enum": ["interactive", "backlog"]},
                        "metadata": {"type": "string", "description": "a JSON object"},
                        "reuse_results": {
                            "type": "string",
                            "enum": ["true", "false"],
                            "description": "take the results of an identical finished "
                            "document (same bytes, pages, engine) instead of reading it again",
                        },
                    },
                }
            },
            "application/json": {"schema": JobCreateFromObject.model_json_schema()},
        }
    }
}


@router.post(
    "",
    status_code=202,
    response_model=JobAccepted,
    openapi_extra=_SUBMIT_DOC,
    dependencies=_JSON_ONLY,
    responses={
        202: {"headers": {"Location": {"description": "the job's status URL (absolute)"}}},
        **problems(400, 404, 409, 413, 415, 429),
    },
)
async def submit(
    request: Request,
    response: Response,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=200,
            description="a retry with the same key and the same request returns the same job",
        ),
    ] = None,
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
            actor=actor,
            idempotency_key=idempotency_key,
        )
    )
    if submitted.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    job = submitted.job
    status_url = urls.job_url(settings, job.id)
    response.headers["Location"] = status_url
    return JobAccepted(
        id=job.id, status=job.status, status_url=status_url, pages_total=job.page_count
    )


async def _from_json(
    request: Request, state: AppState, tenant_id: str
) -> tuple[list[service.UploadedFile], service.JobOptions]:
    settings = state.settings
    try:
        body = JobCreateFromObject.model_validate_json(await request.body())
    except ValidationError as error:
        first = error.errors()[0]
        loc = ("body", *first["loc"])
        field = ".".join(map(str, first["loc"]))
        message = f"invalid JSON body: {field + ': ' if field else ''}{first['msg']}"
        raise InvalidRequest(message, loc=loc) from None
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
        body.reuse_results,
    )
    return [upload], options


async def _from_form(
    request: Request, state: AppState
) -> tuple[list[service.UploadedFile], service.JobOptions]:
    settings, limit = state.settings, state.settings.max_upload_bytes
    form = await request.form(max_files=1000, max_fields=20)
    check_form_fields(form, _FORM_FIELDS)
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
        reuse_results=_flag(form.get("reuse_results"), "reuse_results"),
    )
    return files, options


_FORM_FIELDS = frozenset({"file", "pages", "webhook_url", "priority", "metadata", "reuse_results"})


def _flag(value: object, what: str) -> bool:
    text = _text(value, what)
    if text is None or text.lower() in ("false", "0", "no"):
        return False
    if text.lower() in ("true", "1", "yes"):
        return True
    raise InvalidRequest(f"{what} must be true or false, got {text[:20]!r}", loc=("body", what))


def _text(value: object, what: str) -> str | None:
    return check_text(value, what=what) if isinstance(value, str) and value else None


@router.get("", response_model=JobList, dependencies=_JSON_ONLY)
def list_jobs(
    state: StateDep,
    tenant: TenantDep,
    status: Literal["queued", "running", "succeeded", "failed", "canceled"] | None = None,
    limit: int = Query(20, ge=1, le=100),
    cursor: str | None = Query(None, max_length=500),
) -> JobList:
    """This key's tenant's jobs, newest first."""
    with state.sessions() as session:
        page = listing.list_jobs(
            session, tenant_id=tenant.id, status=status, limit=limit, cursor=cursor
        )
        jobs = [presenters.summary(job, state.settings) for job in page.jobs]
        return JobList(jobs=jobs, next_cursor=page.next_cursor)


_PAGES_QUERY = Query(
    None,
    pattern=page_listing.PAGES_PATTERN,
    description="which pages to list: `all`, `none`, or a range of page numbers (`301-600`: "
    "none if the second is smaller); "
    "default: all of a document of at most `status_pages_inline` (300) pages, none of a longer "
    "one (follow `pages_next`)",
)


@router.get(
    "/{job_id}",
    response_model=JobPublic,
    dependencies=_JSON_ONLY,
    responses={
        **problems(404, 410, 422),
        304: {"description": "the status is unchanged since the ETag given in If-None-Match"},
    },
)
def get_status(
    job_id: JobIdDep,
    request: Request,
    state: StateDep,
    tenant: TenantDep,
    pages: str | None = _PAGES_QUERY,
) -> Response:
    """The job's state and its pages' (which pages: ``?pages=``). An ETag names this answer:
    a poll that sends it back in If-None-Match gets 304 while nothing changed."""
    asked = page_listing.parse_asked(pages)
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        listed = page_listing.listed_pages(
            session, job, asked, inline_max=state.settings.status_pages_inline
        )
        body = presenters.public(job, state.settings, listed).model_dump_json().encode()
    etag = 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if negotiation.client_has(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.post(
    "/{job_id}/cancel",
    response_model=JobPublic,
    status_code=202,
    dependencies=_JSON_ONLY,
    responses=problems(404, 409, 410),
)
def cancel(job_id: JobIdDep, state: StateDep, tenant: TenantDep, actor: ActorDep) -> JobPublic:
    """Stop the job: a queued one at once, a running one after its current page group; its
    unstarted pages end canceled. A finished job cannot be canceled (409)."""
    service.cancel_job(
        state.sessions,
        state.dispatcher,
        state.settings,
        tenant_id=tenant.id,
        job_id=job_id,
        actor=actor,
    )
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        listed = page_listing.listed_pages(
            session, job, None, inline_max=state.settings.status_pages_inline
        )
        return presenters.public(job, state.settings, listed)


@router.delete("/{job_id}", status_code=204, responses=problems(404, 410))
def delete(job_id: JobIdDep, state: StateDep, tenant: TenantDep, actor: ActorDep) -> Response:
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
        actor=actor,
    )
    return Response(status_code=204)
