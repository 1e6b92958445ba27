"""HTTP route for a page's scan: the image the engine read, so a reader can put the page's
text and detected blocks beside it (the console does). Rendered on demand from the job's input
document; it never changes, so its ETag is known before rendering and a revalidation costs no
render."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from ocr_api.deps import ActorDep, AppState, StateDep, TenantDep, current_tenant
from ocr_api.jobs.params import JobIdDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, NOT_MODIFIED, problems
from uocr_core.contracts import PageResult
from uocr_core.errors import NotFound
from uocr_core.jobs import service
from uocr_core.jobs.downloads import record_download
from uocr_core.jobs.page_image import RENDERER_VERSION, PageImageError, PageImageRenderer
from uocr_core.models import Page
from uocr_core.storage import ObjectNotFound

router = APIRouter(
    prefix="/v1/jobs",
    tags=["results"],
    dependencies=[Depends(current_tenant), Depends(negotiation.known_query_only)],
    responses=COMMON_PROBLEMS,
)

JPEG = "image/jpeg"
# The scan never changes; a day, then a revalidation (a 304, no render) in case the renderer
# changed with an upgrade (RENDERER_VERSION is part of the ETag).
_CACHE_CONTROL = "private, max-age=86400"
_MAX_WIDTH = 8192


def page_images(request: Request, state: StateDep) -> PageImageRenderer:
    """One renderer per app (its file cache and MuPDF lock are shared by all requests), made
    on first use so an API that never serves a scan holds nothing."""
    renderer: PageImageRenderer | None = getattr(request.app.state, "page_images", None)
    if renderer is None:
        worker = state.settings.worker
        renderer = PageImageRenderer(
            state.store, dpi=worker.render_dpi, max_side=worker.max_render_side
        )
        request.app.state.page_images = renderer
    return renderer


RendererDep = Annotated[PageImageRenderer, Depends(page_images)]

_HEADERS: dict[str, Any] = {
    "ETag": {"description": "the rendering's identity", "schema": {"type": "string"}},
    "Cache-Control": {
        "description": "private; the scan never changes",
        "schema": {"type": "string"},
    },
}


@router.get(
    "/{job_id}/pages/{page_no}/image",
    response_model=None,
    response_class=Response,  # no JSON 200 in the OpenAPI document: the 200 is an image
    responses={
        200: {
            "description": "The page's scan as the engine read it (JPEG: turned upright when "
            "the page was read turned, see its result's rotation); the page's blocks' boxes "
            "are in its pixels (scale them by the image's size when ?width= narrowed it)",
            "content": {JPEG: {"schema": {"type": "string", "format": "binary"}}},
            "headers": _HEADERS,
        },
        **NOT_MODIFIED,
        **problems(404, 410),
    },
)
async def get_page_image(
    request: Request,
    job_id: JobIdDep,
    page_no: int,
    state: StateDep,
    tenant: TenantDep,
    actor: ActorDep,
    renderer: RendererDep,
    width: Annotated[
        int | None,
        Query(ge=16, le=_MAX_WIDTH, description="at most this many pixels wide (never wider)"),
    ] = None,
) -> Response:
    """Page ``page_no``'s scan, whatever the page's status (a pending page's scan too)."""
    negotiation.require(request, [JPEG])
    page = await run_in_threadpool(_page, state, tenant.id, job_id, page_no)
    rotation = await run_in_threadpool(_rotation, state, page)
    etag = _etag(page, renderer, width, rotation)
    # Until the page is read its image may still turn (a sheet read upside down): revalidate.
    settled = page.status in ("succeeded", "failed", "canceled")
    headers = {"ETag": etag, "Cache-Control": _CACHE_CONTROL if settled else "no-cache"}
    if negotiation.client_has(request, etag):
        return Response(status_code=304, headers=headers)
    try:
        image = await run_in_threadpool(
            renderer.render, page.source_key, page.source_index, max_width=width, rotation=rotation
        )
    except ObjectNotFound:
        raise NotFound(f"job {job_id}'s document is not stored") from None
    except PageImageError as error:
        raise NotFound(f"page {page_no} has no image: {error}") from None
    await run_in_threadpool(
        lambda: record_download(
            state.sessions, actor=actor, target=job_id, item="page_image", page=page_no
        )
    )
    return Response(image.data, media_type=JPEG, headers=headers)


def _page(state: AppState, tenant_id: str, job_id: str, page_no: int) -> Page:
    with state.sessions() as session:
        job = service.get_job(session, tenant_id=tenant_id, job_id=job_id)
        service.ensure_results_kept(job, state.settings)
        page = next((p for p in job.pages if p.page_no == page_no), None)
    if page is None:
        raise NotFound(f"job {job_id} has no page {page_no}")
    return page


def _rotation(state: AppState, page: Page) -> int:
    """How the engine turned the page to read it (a sheet fed upside down or sideways): the
    scan is shown that way, so that the page's boxes lie on its words."""
    if page.status != "succeeded" or not page.result_key:
        return 0
    try:
        return PageResult.model_validate_json(state.store.get(page.result_key)).rotation
    except ObjectNotFound:
        return 0


def _etag(page: Page, renderer: PageImageRenderer, width: int | None, rotation: int) -> str:
    """What the image depends on; the job's input never changes once submitted, and a page's
    rotation once it is read."""
    identity = (
        f"{page.job_id}|{page.page_no}|{page.source_key}|{page.source_index}|"
        f"{renderer.dpi}|{renderer.max_side}|{width}|{rotation}|{RENDERER_VERSION}"
    )
    return '"' + hashlib.sha256(identity.encode()).hexdigest()[:32] + '"'
