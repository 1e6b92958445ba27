"""Text as the search index reads it, and a reader's query checked and put in Postgres' terms.

Postgres' parser splits words at spaces and punctuation, which Chinese and Japanese do not
use: a line of Chinese would be one long "word" found only whole. So each run of CJK
characters is indexed as its overlapping pairs, then its last character alone ("中文字" ->
"中文 文字 字"), and a CJK run in a query becomes the phrase of its pairs, which matches it
anywhere in a line: plain substring matching, through the same index as every other language.
A lone character (猫, 王) is asked for as a prefix ("猫:*"): every character of a run starts a
pair or is the run's last. Other text is left to the
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
    """``text`` with each CJK run written as its overlapping character pairs and its last
    character."""
    return CJK_RUN.sub(_indexed_run, text)


def _indexed_run(run: re.Match[str]) -> str:
    text = run.group()
    return f" {_pairs(text)} {text[-1]} " if len(text) > 1 else f" {text} "


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
    # Lone CJK characters, asked for as prefixes of the indexed pairs (``to_tsquery``'s
    # "猫:*"), ANDed with the rest.
    cjk_singles: tuple[str, ...] = ()

    @property
    def prefixes(self) -> str:
        return " & ".join(f"{char}:*" for char in self.cjk_singles)


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
    if text.count('"') % 2:  # an unclosed quote quotes nothing
        text = "".join(text.rsplit('"', 1)).strip()
    runs = tuple(dict.fromkeys(CJK_RUN.findall(text)))
    singles = tuple(run for run in runs if len(run) == 1)
    rest = CJK_RUN.sub(_without_singles, text)
    return Query(text, _websearch(rest), runs, singles)


def _without_singles(run: re.Match[str]) -> str:
    return " " if len(run.group()) == 1 else run.group()


def _websearch(text: str) -> str:
    """CJK runs as phrases of their pairs: inside quotes the pairs join the phrase; outside,
    each run is quoted as a phrase of its own (a word would match any one pair)."""
    parts = text.split('"')
    for i, part in enumerate(parts):
        quoted = i % 2 == 1
        parts[i] = CJK_RUN.sub(_quoted_pairs if not quoted else _spaced_pairs, part)
    return '"'.join(parts)


def _spaced_pairs(run: re.Match[str]) -> str:
    return f" {_pairs(run.group())} "


def _quoted_pairs(run: re.Match[str]) -> str:
    return f' "{_pairs(run.group())}" '
