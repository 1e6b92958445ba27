"""Text as the search index reads it, and a reader's query checked and put in Postgres' terms.

Postgres' parser splits words at spaces and punctuation, which Chinese and Japanese do not
use: a line of Chinese would be one long "word" found only whole. So each run of CJK
characters is indexed as its overlapping pairs ("中文字" -> "中文 文字"), and a CJK run in a
query becomes the phrase of its pairs, which matches it anywhere in a line: plain substring
matching, through the same index as every other language. Other text is left to the
deployment's text-search configuration (stemming where Postgres has one: docs/search.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from uocr_core.errors import InvalidRequest

MAX_QUERY_CHARS = 500
# Han (with extension A and compatibility ideographs), kana, hangul syllables.
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def indexed_text(text: str) -> str:
    """``text`` with each CJK run written as its overlapping character pairs."""
    return CJK_RUN.sub(_spaced_pairs, text)


def _pairs(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


@dataclass(frozen=True)
class Query:
    """A reader's query: ``websearch`` for Postgres' ``websearch_to_tsquery`` (words, "a
    phrase", -not, or), and the CJK runs it asks for, found in a line as they are."""

    text: str
    websearch: str
    cjk_runs: tuple[str, ...]


def parse(q: str | None) -> Query:
    """The query, or a 422 that says what is wrong with it."""
    if q is None or not q.strip():
        raise InvalidRequest(
            "q is empty: give a word or a phrase to search for", loc=("query", "q")
        )
    if "\x00" in q or _CONTROL.search(q):
        raise InvalidRequest("q holds a control character (such as NUL)", loc=("query", "q"))
    if len(q) > MAX_QUERY_CHARS:
        raise InvalidRequest(
            f"q is {len(q):,} characters long; a query may have at most {MAX_QUERY_CHARS}",
            loc=("query", "q"),
        )
    if not _WORD.search(q):
        raise InvalidRequest(
            "q has no letters or digits to search for (only punctuation)", loc=("query", "q")
        )
    text = " ".join(q.split())
    return Query(text, _websearch(text), tuple(dict.fromkeys(CJK_RUN.findall(text))))


def _websearch(text: str) -> str:
    """CJK runs as phrases of their pairs: inside quotes the pairs join the phrase; outside,
    each run is quoted as a phrase of its own (a word would match any one pair)."""
    parts = text.split('"')
    for i, part in enumerate(parts):
        quoted = i % 2 == 1 and i < len(parts) - 1  # an unclosed quote quotes nothing
        parts[i] = CJK_RUN.sub(_quoted_pairs if not quoted else _spaced_pairs, part)
    return '"'.join(parts)


def _spaced_pairs(run: re.Match[str]) -> str:
    return f" {_pairs(run.group())} "


def _quoted_pairs(run: re.Match[str]) -> str:
    return f' "{_pairs(run.group())}" '
