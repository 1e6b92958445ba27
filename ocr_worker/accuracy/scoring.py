"""Character error rate against a page's own text layer, normalised the same way on both sides.

``normalise`` (both sides):
- Every run of whitespace, newlines included, becomes one space. Where a text layer breaks its
  lines is the PDF producer's business (a table-of-contents entry or a two-column row can come
  out as several "lines"); the order of the words is what is scored, not the line breaks.
- No space between two CJK characters (ideographs, kana, CJK and full-width punctuation): a
  reader sees none, and MuPDF reports the stretch of a justified Chinese line as one.
- NFKC: ligatures ("ﬁ") and full-width forms ("，" -> ",") read as the characters they are.
- Runs of two or more dots, spaced or not, become a space: the dot leaders of a contents page
  or an index are filler whose length depends on the line, and the recognizer reads them as a
  dot or two stuck to the words beside them ("\\name..", ".87"). (An ellipsis goes too, on
  both sides alike.)
- Curly quotes become straight ones: the recognizer reads most of them as ASCII quotes, a
  matter of glyph, not of reading.

``reference_text`` (the ground truth only) adds what a reader expects and the text layer loses:
one space between a Chinese character and a Latin letter or digit ("Debian 系统", "第 3 节"). TeX
(xeCJK, CJK) typesets a visible gap on both sides, but MuPDF reports it on one side only. An OCR
that drops those spaces is scored down for it, as a reader would.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# CJK symbols and punctuation, full-width punctuation (not full-width letters and digits).
_CJK_PUNCT = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
_CJK = f"[{_IDEOGRAPHS}{_CJK_PUNCT}]"
_SPACE_INSIDE_CJK = re.compile(f"(?<={_CJK}) (?={_CJK})")
_WHITESPACE = re.compile(r"\s+")
_DOT_LEADER = re.compile(r"\s*\.(?:\s*\.)+\s*")
_STRAIGHT_QUOTES = str.maketrans("\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f", "''''\"\"\"\"")
_CJK_THEN_LATIN = re.compile(f"(?<=[{_IDEOGRAPHS}])(?=[A-Za-z0-9])")
_LATIN_THEN_CJK = re.compile(f"(?<=[A-Za-z0-9])(?=[{_IDEOGRAPHS}])")


def normalise(text: str) -> str:
    """The form both sides are compared in (see the module docstring)."""
    text = _WHITESPACE.sub(" ", text.replace("\u3000", " ")).strip()
    text = _SPACE_INSIDE_CJK.sub("", text)  # before NFKC, which turns "，" into ","
    text = unicodedata.normalize("NFKC", text)
    text = _DOT_LEADER.sub(" ", text).translate(_STRAIGHT_QUOTES)
    return _WHITESPACE.sub(" ", text).strip()


def reference_text(text_layer: str) -> str:
    """A page's ground truth from its text layer: normalised, with reader spacing between
    Chinese and Latin text."""
    text = normalise(text_layer)
    text = _CJK_THEN_LATIN.sub(" ", text)
    return _LATIN_THEN_CJK.sub(" ", text)


@dataclass(frozen=True)
class PageScore:
    errors: int  # Levenshtein distance, in characters
    length: int  # characters of the reference

    @property
    def cer(self) -> float:
        return self.errors / max(self.length, 1)


def score_page(hypothesis: str, reference: str) -> PageScore:
    """``hypothesis`` as an engine wrote it; ``reference`` from ``reference_text``."""
    return PageScore(Levenshtein.distance(normalise(hypothesis), reference), len(reference))


def cer(hypothesis: str, reference: str) -> float:
    """Character error rate of one page: edits / reference characters."""
    return score_page(hypothesis, reference).cer


def document_cer(scores: list[PageScore]) -> float:
    """All pages' edits over all reference characters (a long page weighs more)."""
    return sum(s.errors for s in scores) / max(sum(s.length for s in scores), 1)


def bag_error(hypothesis: str, reference: str) -> float:
    """Characters missing or extra whatever their order (spaces aside), over the reference's:
    what recognition alone gets wrong, for checking that a scan is readable at all."""
    wanted = Counter(reference.replace(" ", ""))
    got = Counter(normalise(hypothesis).replace(" ", ""))
    return sum(((wanted - got) + (got - wanted)).values()) / max(sum(wanted.values()), 1)


def page_order_ok(hypotheses: list[str], references: list[str]) -> bool:
    """As many output pages as reference pages, and each output page closest (by CER) to its
    own reference page: a missing, duplicated or swapped page fails."""
    if len(hypotheses) != len(references):
        return False
    for index, hypothesis in enumerate(hypotheses):
        rates = [cer(hypothesis, reference) for reference in references]
        if min(range(len(rates)), key=rates.__getitem__) != index:
            return False
    return True


# A reference line must be this long to be found by its content alone, and found at least this
# well (rapidfuzz's partial ratio, 0-100) to count as found.
_LINE_MIN_CHARS = 12
_LINE_MIN_SCORE = 80


@dataclass(frozen=True)
class LineOrder:
    """How a page's lines (its text layer's) come out: ``found`` is the share found whole in the
    output (a table row read row by row is; one read column by column is not: its cells come
    apart), ``in_order`` the share of pairs of found lines whose order the output keeps (a
    two-column page read line by line across the gutter does not). ``None``: the page has too
    few distinctive lines (or found lines) to say."""

    found: float | None
    in_order: float | None


def line_order(hypothesis: str, text_layer: str) -> LineOrder:
    """CER barely moves when a table is read column by column or two columns are interleaved
    (the same characters, in long runs); these two shares drop sharply."""
    lines = [reference_text(line) for line in text_layer.splitlines()]
    counts = Counter(lines)
    distinct = [line for line in lines if len(line) >= _LINE_MIN_CHARS and counts[line] == 1]
    output = normalise(hypothesis)
    found = []
    for line in distinct:
        match = fuzz.partial_ratio_alignment(line, output, score_cutoff=_LINE_MIN_SCORE)
        if match is not None:
            found.append(match.dest_start)
    pairs = len(found) * (len(found) - 1) // 2
    kept = sum(a < b for i, a in enumerate(found) for b in found[i + 1 :])
    return LineOrder(
        found=len(found) / len(distinct) if distinct else None,
        in_order=kept / pairs if pairs else None,
    )


# A cell this long is found by its content, as lines are (a few recognition errors allowed);
# a shorter one ("1 0 0", "red") must be there as it is, but for the recognizer's usual forms of
# a minus sign and angle brackets ("−0" read "-0", "⟨size⟩" read "(size)").
_CELL_FUZZY_CHARS = 6
_CELL_FORMS = str.maketrans("\u2212\u2013\u27e8\u27e9\u3008\u3009", "--()()")


def rows_kept(hypothesis: str, rows: list[list[str]]) -> float | None:
    """The share of a page's table rows whose cells all come out in one line, in order: a
    table read row by row keeps them (its rows are lines, cells apart by tabs); read column by
    column, or with its wrapped cells torn from their rows, it does not. ``rows``: the cells of
    each row of two or more cells, left to right (``bench/accuracy/runner.table_rows``).
    ``None``: the page has no such row."""
    if not rows:
        return None
    lines = [normalise(line).translate(_CELL_FORMS) for line in hypothesis.splitlines()]
    kept = sum(any(_cells_in_order(row, line) for line in lines) for row in rows)
    return kept / len(rows)


def _cells_in_order(cells: list[str], line: str) -> bool:
    at = 0
    for cell in (reference_text(c).translate(_CELL_FORMS) for c in cells):
        if len(cell) < _CELL_FUZZY_CHARS:
            found = line.find(cell, at)
            if found < 0:
                return False
            at = found + len(cell)
            continue
        match = fuzz.partial_ratio_alignment(cell, line[at:], score_cutoff=_LINE_MIN_SCORE)
        if match is None:
            return False
        at += match.dest_end
    return True
