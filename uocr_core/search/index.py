"""The search index's writes: a recorded page's words and lines in, a job's pages out.

Postgres computes each page's ``tsvector`` as the row is written (``to_tsvector`` with the
deployment's configuration), in the record stage's transaction: a page is findable exactly when
its result is recorded, and a group recorded twice (a retry) writes its pages again. SQLite (the
embedded run) keeps no index: nothing searches it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import cast, create_engine, delete, func, insert, literal, select, text
from sqlalchemy.dialects.postgresql import REGCONFIG
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from uocr_core.models import PageText
from uocr_core.search.words import indexed_text

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PageLines:
    """A read page as search shows it: its lines in reading order, each with its box."""

    page_no: int
    lines: Sequence[tuple[str, Box]]
    width: int | None
    height: int | None


def known_languages(database_url: str) -> set[str]:
    """The text-search configurations Postgres has (``\\dF``): what search.language may name."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return set(connection.scalars(text("SELECT cfgname FROM pg_ts_config")))
    finally:
        engine.dispose()


def searchable(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def add_pages(
    session: Session, *, tenant_id: str, job_id: str, pages: Iterable[PageLines], language: str
) -> None:
    """Index the pages (again, if they were: a retried group's pages replace the first)."""
    if not searchable(session):
        return
    rows = [
        {
            "job_id": job_id,
            "page_no": page.page_no,
            "tenant_id": tenant_id,
            "document": func.to_tsvector(
                cast(language, REGCONFIG), indexed_text("\n".join(_clean(t) for t, _ in page.lines))
            ),
            "lines": [[_clean(text), *(round(v, 1) for v in box)] for text, box in page.lines],
            "width": page.width,
            "height": page.height,
        }
        for page in pages
    ]
    if not rows:
        return
    statement = pg_insert(PageText).values(rows)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[PageText.job_id, PageText.page_no],
            set_={
                name: statement.excluded[name]
                for name in ("document", "lines", "width", "height", "tenant_id")
            },
        )
    )


def _clean(text: str) -> str:
    """Postgres text holds no NUL (a model may decode one): dropped, not the page's recording."""
    return text.replace("\x00", "")


def copy_job(session: Session, *, source_job_id: str, job_id: str, tenant_id: str) -> None:
    """A job that took another's results (content reuse) is found as that job's pages are."""
    if not searchable(session):
        return
    columns = (PageText.document, PageText.lines, PageText.width, PageText.height)
    session.execute(
        insert(PageText).from_select(
            ["job_id", "page_no", "tenant_id", "document", "lines", "width", "height"],
            select(literal(job_id), PageText.page_no, literal(tenant_id), *columns).where(
                PageText.job_id == source_job_id
            ),
        )
    )


def forget_jobs(session: Session, job_ids: Sequence[str]) -> None:
    """The jobs' pages leave the index (deleted, or their results expired)."""
    if job_ids:
        session.execute(delete(PageText).where(PageText.job_id.in_(job_ids)))
