"""What GET /v1/search answers: the tenant's pages that match, best first, each with the boxes
of its matches on the scan."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SearchHit(BaseModel):
    job_id: str
    page: int
    source: str = Field(description="the document's file name")
    batch_id: str | None
    rank: float = Field(description="cover density: higher where the words stand closer")
    snippet: str = Field(description="the first line of the page that matches")
    boxes: list[tuple[float, float, float, float]] = Field(
        description="each match on the page as x1, y1, x2, y2 in the page's pixels "
        "(width x height, the page turned upright), as the page's blocks are given"
    )
    width: int | None
    height: int | None
    page_url: str = Field(description="the page's result (GET)")
    image_url: str = Field(description="the page's scan (GET)")


class SearchResults(BaseModel):
    query: str
    hits: list[SearchHit]
    next_cursor: str | None
