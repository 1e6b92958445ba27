"""HTTP routes for what a job produced: the document's result in each format, a presigned
link to it, and one page. Results never change once written, so they carry an ETag and may be
cached for good; a client polling a page it already has gets a 304."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from ocr_api.deps import ActorDep, AppState, StateDep, TenantDep, current_tenant
from ocr_api.jobs import chunk_sizes
from ocr_api.jobs.params import JobIdDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, NOT_MODIFIED, problems
from uocr_core import object_keys
from uocr_core.contracts import PageResult
from uocr_core.errors import Conflict, NotFinished, NotFound
from uocr_core.job_lifecycle import TERMINAL
from uocr_core.jobs import service
from uocr_core.jobs.downloads import record_download
from uocr_core.models import Job
from uocr_core.schemas.jobs import JobResult, ResultLink
from uocr_core.storage import ObjectNotFound

router = APIRouter(
    prefix="/v1/jobs",
    tags=["results"],
    dependencies=[Depends(current_tenant), Depends(negotiation.known_query_only)],
    responses=COMMON_PROBLEMS,
)

ResultFormat = Literal["json", "markdown", "text", "jsonl", "pdf", "hocr", "alto", "chunks"]
# A format by its media type, for a client that asks by Accept instead of ?format=.
_FORMAT_OF_MEDIA = {
    object_keys.result_media_type(fmt).split(";")[0]: fmt for fmt in object_keys.RESULT_FILES
}
_IMMUTABLE = "private, max-age=31536000, immutable"
_CACHE_HEADERS = {
    "ETag": {"description": "the content's hash", "schema": {"type": "string"}},
    "Cache-Control": {"description": "results never change", "schema": {"type": "string"}},
}
_FILE_CONTENT: dict[str, Any] = {
    media: {"schema": {"type": "string", "format": "binary" if fmt == "pdf" else "text"}}
    for media, fmt in _FORMAT_OF_MEDIA.items()
    if fmt != "json"
}


@router.get(
    "/{job_id}/result",
    response_model=None,
    responses={
        200: {
            "model": JobResult,
            "description": "The document's result in the format asked for (?format= or Accept)",
            "content": _FILE_CONTENT,
            "headers": {
                **_CACHE_HEADERS,
                "Content-Disposition": {"description": "a file name", "schema": {"type": "string"}},
            },
        },
        **NOT_MODIFIED,
        **problems(404, 409, 410),
    },
)
def get_result(
    request: Request,
    job_id: JobIdDep,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
    format: Annotated[
        ResultFormat | None, Query(description="default: by Accept, else json")
    ] = None,
    max_chars: Annotated[
        int | None, Query(ge=100, le=100_000, description="chunks: at most this many characters")
    ] = None,
    max_tokens: Annotated[
        int | None, Query(ge=16, le=100_000, description="chunks: at most this many tokens")
    ] = None,
    tokenizer: Annotated[
        str | None, Query(max_length=100, description="chunks: whose tokens (with max_tokens)")
    ] = None,
) -> Response:
    """The document's result. Chunks come at 1,500 characters unless ``max_chars``, or
    ``max_tokens`` of a ``tokenizer`` the deployment lists, asks for another size."""
    fmt = _format(request, format)
    measure = chunk_sizes.asked(fmt, max_chars, max_tokens, tokenizer, state.settings)
    _finished_job(state, tenant.id, job_id)
    if measure is None:
        data = _result_object(state, job_id, fmt)
    else:
        data = chunk_sizes.rechunked(_result_object(state, job_id, "jsonl"), measure)
    name = f"{job_id}-{object_keys.result_file_name(fmt)}"
    response = _immutable(
        request,
        data,
        object_keys.result_media_type(fmt),
        {"Content-Disposition": f'attachment; filename="{name}"'},
    )
    if response.status_code == 200:  # a 304 hands nothing over
        record_download(state.sessions, actor=actor, target=job_id, item="result", format=fmt)
    return response


@router.get(
    "/{job_id}/result/link",
    response_model=ResultLink,
    dependencies=[Depends(negotiation.accepts_json)],
    responses=problems(404, 409, 410),
)
def get_result_link(
    job_id: JobIdDep,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
    format: ResultFormat = "json",
) -> ResultLink:
    """A presigned URL straight to the object store: for big results (the searchable PDF)."""
    _finished_job(state, tenant.id, job_id)
    _result_object(state, job_id, format)  # a link to nothing would fail later, in the client
    record_download(state.sessions, actor=actor, target=job_id, item="result_link", format=format)
    url = state.store.presigned_url(object_keys.result_key(job_id, format))
    return ResultLink(url=url, expires_in_seconds=state.settings.s3.presign_seconds)


@router.get(
    "/{job_id}/pages/{page_no}",
    response_model=None,
    dependencies=[Depends(negotiation.accepts_json)],
    responses={
        200: {"model": PageResult, "description": "The page's result", "headers": _CACHE_HEADERS},
        **NOT_MODIFIED,
        **problems(404, 409, 410),
    },
)
def get_page(
    request: Request,
    job_id: JobIdDep,
    page_no: int,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
) -> Response:
    """One page's result as soon as its page group is done (409 until then; poll the job)."""
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant.id, job_id=job_id)
        service.ensure_results_kept(job, state.settings)
        page = next((p for p in job.pages if p.page_no == page_no), None)
        if page is None:
            raise NotFound(f"job {job_id} has no page {page_no}")
        if page.status == "canceled":
            raise Conflict(f"page {page_no} was canceled with its job before it ran: no result")
        if page.result_key is None:
            raise NotFinished(f"page {page_no} is {page.status}; poll the job and retry")
    try:
        data = state.store.get(page.result_key)
    except ObjectNotFound:
        raise NotFinished(f"page {page_no} is not stored yet") from None
    response = _immutable(request, data, "application/json", {})
    if response.status_code == 200:
        record_download(state.sessions, actor=actor, target=job_id, item="page", page=page_no)
    return response


def _format(request: Request, asked: str | None) -> str:
    if asked is not None:
        negotiation.require(request, [object_keys.result_media_type(asked).split(";")[0]])
        return asked
    media = negotiation.require(request, list(_FORMAT_OF_MEDIA))
    return _FORMAT_OF_MEDIA[media]


def _immutable(request: Request, data: bytes, media_type: str, headers: dict[str, str]) -> Response:
    etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
    headers = {**headers, "ETag": etag, "Cache-Control": _IMMUTABLE}
    if negotiation.client_has(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=media_type, headers=headers)


def _finished_job(state: AppState, tenant_id: str, job_id: str) -> Job:
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant_id, job_id=job_id)
    service.ensure_results_kept(job, state.settings)
    if job.status not in TERMINAL:
        raise NotFinished(f"job {job_id} is {job.status}; the result exists once it finishes")
    if job.pages_done == 0:
        raise Conflict(f"job {job_id} ended {job.status} before any page was processed: no result")
    return job


def _result_object(state: AppState, job_id: str, fmt: str) -> bytes:
    try:
        return state.store.get(object_keys.result_key(job_id, fmt))
    except ObjectNotFound:
        if fmt == "pdf":  # built after the text results, and only logged if it fails
            raise NotFound(
                f"job {job_id} has no searchable PDF; its other results are complete"
            ) from None
        raise NotFound(f"job {job_id} has no {fmt} result") from None
