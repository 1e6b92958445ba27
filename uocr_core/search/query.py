"""A tenant's search: the pages whose text matches a query, best first, each with where the
match lies on its scan.

One statement finds and ranks: the tenant's matching pages through the GIN index led by the
tenant (``ix_page_texts_search``), at most ``rank_candidates`` of them ranked by cover density
(``ts_rank_cd``: how close together the query's words stand). Ranking reads each candidate's
whole ``tsvector``, so the cap is what keeps a word found on every page of 10^6 answering in
milliseconds; past it, a more specific query finds the rest (docs/search.md). Then the page of
hits shown has its lines matched word by word for the boxes (``hits``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.orm import Session

from uocr_core.errors import InvalidRequest
from uocr_core.search import hits
from uocr_core.search.words import Query


@dataclass(frozen=True)
class Hit:
    job_id: str
    source_name: str
    batch_id: str | None
    page_no: int
    rank: float
    snippet: str
    boxes: list[hits.Box]
    width: int | None
    height: int | None


@dataclass(frozen=True)
class SearchPage:
    hits: list[Hit]
    next_cursor: str | None  # None on the last page


@dataclass(frozen=True)
class Scope:
    """Which of the tenant's pages to search: all, a batch's, a job's, or one page."""

    tenant_id: str
    batch_id: str | None = None
    job_id: str | None = None
    page_no: int | None = None


_FIND = """
WITH q AS (SELECT {tsquery} AS query),
candidates AS (
    SELECT pt.job_id, pt.page_no, ts_rank_cd(pt.document, q.query) AS rank
    FROM page_texts pt CROSS JOIN q JOIN jobs j ON j.id = pt.job_id
    WHERE pt.tenant_id = :tenant_id AND pt.document @@ q.query
      AND j.deleted_at IS NULL AND j.results_deleted_at IS NULL {scope}
    LIMIT :candidates
)
SELECT c.job_id, c.page_no, c.rank, j.source_name, j.batch_id, pt.lines, pt.width, pt.height
FROM candidates c
JOIN jobs j ON j.id = c.job_id
JOIN page_texts pt ON pt.job_id = c.job_id AND pt.page_no = c.page_no
ORDER BY c.rank DESC, c.job_id, c.page_no
LIMIT :limit OFFSET :offset
"""
_SCOPES = {
    "batch_id": "AND j.batch_id = :batch_id",
    "job_id": "AND pt.job_id = :job_id",
    "page_no": "AND pt.page_no = :page_no",
}


def search(
    session: Session,
    query: Query,
    scope: Scope,
    *,
    language: str,
    candidates: int,
    limit: int = 20,
    cursor: str | None = None,
) -> SearchPage:
    """The scope's pages matching ``query``, best first, a page of ``limit`` hits at a time."""
    if session.get_bind().dialect.name != "postgresql":
        raise InvalidRequest("search needs the service's Postgres; the embedded run keeps none")
    asked = _asked_lexemes(session, query, language)
    offset = _offset(cursor, candidates)
    filters = {name: value for name, value in vars(scope).items() if name in _SCOPES}
    used = {name: value for name, value in filters.items() if value is not None}
    statement = text(
        _FIND.format(tsquery=_tsquery(query), scope=" ".join(_SCOPES[name] for name in used))
    )
    rows = session.execute(
        statement,
        {
            "language": language,
            "websearch": query.websearch,
            "prefixes": query.prefixes,
            "tenant_id": scope.tenant_id,
            "candidates": candidates,
            "limit": limit + 1,
            "offset": offset,
            **used,
        },
    ).all()
    shown = rows[:limit]
    pages = {(row.job_id, row.page_no): _lines(row.lines) for row in shown}
    reduced = _reduced_words(session, language, pages.values())

    words = hits.Words(
        asked=lambda word: not reduced.get(word, set()).isdisjoint(asked),
        stop=lambda word: word in reduced and not reduced[word],
    )
    found = [
        _hit(row, hits.find(pages[row.job_id, row.page_no], words, query.cjk_runs)) for row in shown
    ]
    more = len(rows) > limit and offset + limit < candidates
    return SearchPage(found, _cursor(offset + limit) if more else None)


def _asked_lexemes(session: Session, query: Query, language: str) -> set[str]:
    """The lexemes the query looks for, or a 422 if it has none (only words too common)."""
    tsquery = session.scalar(
        text(f"SELECT ({_tsquery(query)})::text"),
        {"language": language, "websearch": query.websearch, "prefixes": query.prefixes},
    )
    if not tsquery:
        raise InvalidRequest(
            f"q ({query.text!r}) has only words too common to search for ({language} "
            "stop words such as 'the', 'of'); add a word that says more",
            loc=("query", "q"),
        )
    asked = hits.lexemes(tsquery, positive_only=True)
    if not asked:
        raise InvalidRequest(
            f"q ({query.text!r}) only leaves words out (-word): say what to find as well",
            loc=("query", "q"),
        )
    return asked


def _tsquery(query: Query) -> str:
    """The query in Postgres' terms: the words and phrases through the deployment's
    configuration, and lone CJK characters as prefixes of the indexed pairs (words.py)."""
    words = "websearch_to_tsquery(CAST(:language AS regconfig), :websearch)"
    if not query.cjk_singles:
        return words
    if not query.websearch.strip():
        return "to_tsquery('simple', :prefixes)"
    return f"({words} && to_tsquery('simple', :prefixes))"


def _reduced_words(
    session: Session, language: str, pages: Iterable[list[hits.Line]]
) -> dict[str, set[str]]:
    """Each distinct word on the shown pages with the lexemes Postgres reduces it to."""
    words = sorted(set[str]().union(*(hits.line_words(lines) for lines in pages)))
    if not words:
        return {}
    rows = session.execute(
        text(
            "SELECT w, to_tsvector(CAST(:language AS regconfig), w)::text "
            "FROM unnest(CAST(:words AS text[])) AS w"
        ),
        {"language": language, "words": words},
    ).all()
    return hits.words_lexemes({word: vector for word, vector in rows})


def _lines(stored: list[list[Any]]) -> list[hits.Line]:
    """The stored ``[text, x1, y1, x2, y2]`` lines."""
    return [
        hits.Line(str(t), (float(x1), float(y1), float(x2), float(y2)))
        for t, x1, y1, x2, y2 in stored
    ]


def _hit(row: Row[Any], found: hits.Found) -> Hit:
    return Hit(
        job_id=row.job_id,
        source_name=row.source_name,
        batch_id=row.batch_id,
        page_no=row.page_no,
        rank=float(row.rank),
        snippet=found.snippet,
        boxes=found.boxes,
        width=row.width,
        height=row.height,
    )


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"hits:{offset}".encode()).decode().rstrip("=")


def _offset(cursor: str | None, candidates: int) -> int:
    if cursor is None:
        return 0
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = decoded.partition(":")
        offset = int(number) if kind == "hits" and number.isdecimal() else -1
    except (binascii.Error, UnicodeDecodeError, ValueError):
        offset = -1
    if not 0 < offset < candidates:
        raise InvalidRequest("cursor is not one this API gave out; start without it")
    return offset
