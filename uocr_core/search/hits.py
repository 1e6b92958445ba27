"""Where a query's words lie on a found page: spans of its lines, then boxes on the scan.

A line's box is shared among its characters by their count, as the hOCR and ALTO outputs place
words: an engine gives a box a line (or a block, in bands), not a box a character. A word
matches when Postgres reduces it to one of the query's lexemes (so "running" finds "runs" under
English stemming); a CJK run of the query matches where it stands in a line, character for
character. Neighbouring matches on a line, with only spaces, punctuation or stop words between
("deed of gift"), make one box: a phrase is one box, not one a word (CJK text between keeps
them apart).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from uocr_core.search.words import CJK_RUN

Box = tuple[float, float, float, float]
Span = tuple[int, int]
# A word as Postgres' parser sees one: letters and digits, CJK left to the runs.
WORD = re.compile(r"[^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
MAX_BOXES_A_PAGE = 50
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class Line:
    text: str
    box: Box


@dataclass(frozen=True)
class Found:
    boxes: list[Box]
    snippet: str


def line_words(lines: Iterable[Line]) -> set[str]:
    """The words of the lines (lower case), each to be reduced to its lexemes once."""
    return {m.group().lower() for line in lines for m in WORD.finditer(line.text)}


@dataclass(frozen=True)
class Words:
    """What the index makes of a word: whether it is one the query asks for, and whether it is
    a stop word (indexed as nothing), which a phrase's box may span."""

    asked: Callable[[str], bool]
    stop: Callable[[str], bool]


def find(lines: Sequence[Line], words: Words, cjk_runs: Sequence[str]) -> Found:
    """The boxes of the query's matches on the page's lines, and the first matching line."""
    boxes: list[Box] = []
    snippet = ""
    for line in lines:
        found = _word_spans(line.text, words.asked) + _run_spans(line.text, cjk_runs)
        spans = _merged(line.text, found, words.stop)
        if not spans:
            continue
        snippet = snippet or _snippet(line.text, spans[0])
        boxes.extend(span_box(line, span) for span in spans)
        if len(boxes) >= MAX_BOXES_A_PAGE:
            return Found(boxes[:MAX_BOXES_A_PAGE], snippet)
    return Found(boxes, snippet or (lines[0].text[:SNIPPET_CHARS] if lines else ""))


def span_box(line: Line, span: Span) -> Box:
    """The part of the line's box under characters ``span``, shared by character count."""
    x1, y1, x2, y2 = line.box
    share = (x2 - x1) / max(len(line.text), 1)
    return (round(x1 + share * span[0], 1), y1, round(x1 + share * span[1], 1), y2)


def _word_spans(text: str, matches_word: Callable[[str], bool]) -> list[Span]:
    return [m.span() for m in WORD.finditer(text) if matches_word(m.group().lower())]


def _run_spans(text: str, runs: Sequence[str]) -> list[Span]:
    spans = []
    for run in runs:
        start = text.find(run)
        while start >= 0:
            spans.append((start, start + len(run)))
            start = text.find(run, start + 1)
    return spans


def _merged(text: str, spans: list[Span], stop: Callable[[str], bool]) -> list[Span]:
    """Sorted, with spans joined where they overlap or only stop words stand between."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        gap = text[merged[-1][1] : start] if merged else ""
        fillers = all(stop(m.group().lower()) for m in WORD.finditer(gap))
        if merged and fillers and not CJK_RUN.search(gap):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _snippet(text: str, span: Span) -> str:
    """The line, or as much of it around the match as a result list shows."""
    if len(text) <= SNIPPET_CHARS:
        return text
    start = max(0, min(span[0] - SNIPPET_CHARS // 3, len(text) - SNIPPET_CHARS))
    return ("…" if start else "") + text[start : start + SNIPPET_CHARS] + "…"


def lexemes(tsvector_or_query: str, *, positive_only: bool = False) -> set[str]:
    """The lexemes of a ``tsvector`` or ``tsquery`` as Postgres writes it (``'run':3`` or
    ``'run' & !'slow'``); with ``positive_only``, not those the query excludes."""
    found = set()
    for negated, lexeme in _LEXEME.findall(tsvector_or_query):
        if not (positive_only and negated):
            found.add(lexeme.replace("''", "'"))
    return found


_LEXEME = re.compile(r"(!?)\s*'((?:[^']|'')+)'")


def is_cjk_pair(lexeme: str) -> bool:
    return CJK_RUN.fullmatch(lexeme) is not None


def words_lexemes(words: Mapping[str, str]) -> dict[str, set[str]]:
    """Each word's lexemes, from the ``tsvector`` text Postgres made of it."""
    return {word: lexemes(vector) for word, vector in words.items()}
