"""HTTP route for search over a tenant's read pages: parse, call ``uocr_core.search``, shape
the answer (docs/search.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from ocr_api.deps import StateDep, TenantDep, current_tenant
from ocr_api.jobs.params import UUID
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS
from uocr_core import urls
from uocr_core.schemas.search import SearchHit, SearchResults
from uocr_core.search import query as search_query
from uocr_core.search import words
from uocr_core.settings import Settings

router = APIRouter(
    tags=["search"],
    dependencies=[
        Depends(current_tenant),
        Depends(negotiation.known_query_only),
        Depends(negotiation.accepts_json),
    ],
    responses=COMMON_PROBLEMS,
)
IdFilter = Annotated[str | None, Query(pattern=f"^{UUID.pattern}$")]


@router.get("/v1/search", response_model=SearchResults)
def search(
    state: StateDep,
    tenant: TenantDep,
    q: str = Query(
        description='words (stemmed), "a phrase", -excluded, or; Chinese and Japanese '
        "matched as written",
        min_length=1,
        max_length=words.MAX_QUERY_CHARS,
    ),
    batch_id: IdFilter = None,
    job_id: IdFilter = None,
    page: int | None = Query(None, ge=1, le=2_147_483_647, description="with job_id: one page"),
    limit: int = Query(20, ge=1, le=100),
    cursor: str | None = Query(None, max_length=100),
) -> SearchResults:
    """This tenant's read pages that match ``q``, best first, each with the boxes of its
    matches on the page's scan. Pages are found from the moment they are recorded until the
    job is deleted or its results expire."""
    parsed = words.parse(q)
    scope = search_query.Scope(tenant.id, batch_id=batch_id, job_id=job_id, page_no=page)
    settings = state.settings
    with state.sessions() as session:
        found = search_query.search(
            session,
            parsed,
            scope,
            language=settings.search.language,
            candidates=settings.search.rank_candidates,
            limit=limit,
            cursor=cursor,
        )
    hits = [_public(hit, settings) for hit in found.hits]
    return SearchResults(query=parsed.text, hits=hits, next_cursor=found.next_cursor)


def _public(hit: search_query.Hit, settings: Settings) -> SearchHit:
    page = f"/pages/{hit.page_no}"
    return SearchHit(
        job_id=hit.job_id,
        page=hit.page_no,
        source=hit.source_name,
        batch_id=hit.batch_id,
        rank=round(hit.rank, 6),
        snippet=hit.snippet,
        boxes=hit.boxes,
        width=hit.width,
        height=hit.height,
        page_url=urls.job_url(settings, hit.job_id, page),
        image_url=urls.job_url(settings, hit.job_id, f"{page}/image"),
    )
