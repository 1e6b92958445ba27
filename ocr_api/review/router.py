"""HTTP routes for the review list: the tenant's pages worth a human look, oldest first, and
marking one reviewed. Thin: parse, call ``uocr_core.jobs.review``, shape the answer."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel

from ocr_api.deps import ActorDep, StateDep, TenantDep, current_tenant
from ocr_api.jobs.params import UUID, JobIdDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, problems
from uocr_core import urls
from uocr_core.db import transaction
from uocr_core.jobs import review
from uocr_core.schemas.jobs import ReviewList, ReviewPagePublic
from uocr_core.settings import Settings

router = APIRouter(
    tags=["review"],
    dependencies=[
        Depends(current_tenant),
        Depends(negotiation.known_query_only),
        Depends(negotiation.accepts_json),
    ],
    responses=COMMON_PROBLEMS,
)
PageNo = Annotated[int, Path(ge=1, le=2_147_483_647, description="the page's number")]


class PageReviewed(BaseModel):
    job_id: str
    page: int
    reviewed_at: datetime
    reviewed_by: str


@router.get("/v1/review", response_model=ReviewList)
def pages_to_review(
    state: StateDep,
    tenant: TenantDep,
    batch_id: str | None = Query(None, pattern=f"^{UUID.pattern}$", description="one batch's"),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = Query(None, max_length=500),
) -> ReviewList:
    """This tenant's pages worth a look, oldest first: failed, read with a warning (cut by its
    token budget, caught looping, empty) or with low confidence; until marked reviewed."""
    with state.sessions() as session:
        found = review.pages_to_review(
            session, tenant_id=tenant.id, batch_id=batch_id, limit=limit, cursor=cursor
        )
        pages = [_public(item, state.settings) for item in found.items]
    return ReviewList(pages=pages, next_cursor=found.next_cursor)


@router.post(
    "/v1/jobs/{job_id}/pages/{page_no}/reviewed",
    response_model=PageReviewed,
    responses=problems(404),
)
def mark_reviewed(
    job_id: JobIdDep, page_no: PageNo, state: StateDep, tenant: TenantDep, actor: ActorDep
) -> PageReviewed:
    """The page leaves the review list; the audit log names who looked. Marking it again
    keeps the first mark."""
    with transaction(state.sessions) as session:
        page = review.mark_reviewed(
            session, tenant_id=tenant.id, job_id=job_id, page_no=page_no, actor=actor
        )
        assert page.reviewed_at is not None and page.reviewed_by is not None
        return PageReviewed(
            job_id=job_id, page=page_no, reviewed_at=page.reviewed_at, reviewed_by=page.reviewed_by
        )


def _public(item: review.ReviewItem, settings: Settings) -> ReviewPagePublic:
    page, job = item.page, item.job
    return ReviewPagePublic(
        job_id=job.id,
        page=page.page_no,
        source=job.source_name,
        batch_id=job.batch_id,
        status=page.status,  # type: ignore[arg-type]
        confidence=page.confidence,
        warnings=page.warnings,
        error=page.error,
        finished_at=page.finished_at,
        page_url=urls.job_url(settings, job.id, f"/pages/{page.page_no}"),
        image_url=urls.job_url(settings, job.id, f"/pages/{page.page_no}/image"),
        review_url=urls.job_url(settings, job.id, f"/pages/{page.page_no}/reviewed"),
    )
