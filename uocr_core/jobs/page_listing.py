"""Which of a job's pages a status answer lists. A short document's status lists every page;
a long one's is a summary unless the caller asks (``all``, or a range of page numbers), so a
client polling a 3,000-page book reads a few hundred bytes a poll, not every page's row. The
pages come in ranges: each answer names the next one while pages remain."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from uocr_core.errors import InvalidRequest
from uocr_core.job_lifecycle import GROUP_FINISHED
from uocr_core.models import Job, Page, PageGroup

PageRange = tuple[int, int]  # first and last page number, both listed
Asked = Literal["all", "none"] | PageRange | None  # None: as the document's length decides
# The HTTP layer declares this pattern, so a client knows the form before it asks.
PAGES_PATTERN = r"^(all|none|[0-9]{1,9}-[0-9]{1,9})$"


def parse_asked(value: str | None) -> Asked:
    """``all``, ``none``, ``A-B`` (the pages numbered A to B: none if B < A), or nothing."""
    if value is None or value in ("all", "none"):
        return value  # type: ignore[return-value]
    if not re.fullmatch(PAGES_PATTERN, value):
        raise InvalidRequest(
            f"pages={value[:40]!r}: give 'all', 'none' or a range of page numbers like '1-300'"
        )
    low, high = value.split("-")
    return int(low), int(high)


@dataclass(frozen=True)
class ListedPages:
    pages: list[Page]
    listed: str | None  # "all", "A-B", or None: no page listed
    next_range: PageRange | None  # the pages after these, while any remain
    groups_total: int
    groups_done: int


def group_counts(session: Session, job_id: str) -> tuple[int, int]:
    """The job's page groups: how many in all, and how many finished (counted by the database)."""
    groups = dict(
        session.execute(
            select(PageGroup.status, func.count())
            .where(PageGroup.job_id == job_id)
            .group_by(PageGroup.status)
        ).all()
    )
    return sum(groups.values()), sum(groups.get(s, 0) for s in GROUP_FINISHED)


def listed_pages(session: Session, job: Job, asked: Asked, *, inline_max: int) -> ListedPages:
    """The pages ``asked`` names (by default: all of a document of at most ``inline_max``
    pages, none of a longer one), and the range after them in steps of ``inline_max``."""
    if asked is None:
        asked = "all" if job.page_count <= inline_max else "none"
    total, done = group_counts(session, job.id)
    if asked == "all":
        return ListedPages(list(job.pages), "all", None, total, done)
    last_page = session.scalar(select(func.max(Page.page_no)).where(Page.job_id == job.id)) or 0
    if asked == "none":
        first = (1, inline_max) if last_page else None
        return ListedPages([], None, first, total, done)
    low, high = asked
    pages = session.scalars(
        select(Page)
        .where(Page.job_id == job.id, Page.page_no.between(low, high))
        .order_by(Page.position)
    ).all()
    following = (high + 1, high + inline_max) if high < last_page else None
    return ListedPages(list(pages), f"{low}-{high}", following, total, done)
