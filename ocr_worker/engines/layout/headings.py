"""Headings from size evidence measured on the rotated line (the quad's height across its
baseline), from where they stand, and from section numbers.

A heading is short (one or two lines), has words, and stands apart: space above it, and either
larger than body text or numbered like a section ("5.2 Managing packages"). Body lines the
detector measured tall (a superscript, a line of capitals) lack the space above or run across
the whole column.
"""

from __future__ import annotations

import re

# LaTeX's \large is 1.2 times body text, its headings' smallest step up; 1.15 leaves room for the
# detector's few pixels of padding but not for a body line it measured tall.
HEADING_RATIO = 1.15
# Clearly larger (LaTeX's \Large is 1.44): a heading even if it runs across the column.
LARGE_RATIO = 1.3
# Two levels from size alone: the detector's box heights vary by about a tenth for one type
# size, enough to blur LaTeX's neighbouring steps (\large 1.2, \Large 1.44, \LARGE 1.73, \huge
# 2.07 times body text) but not a chapter title (\LARGE and up) from a section heading.
TITLE_RATIO = 1.55
# A heading rarely fills its column; a body line nearly always does.
SHORT_LINE = 0.8
# Headings do not end a sentence or lead into one.
SENTENCE_END = ".,;:\u3002\uff0c\uff1b\uff1a"
# "3.2.1 if": lower case after a space ("3.2.1if" is a number run into a word).
SECTION_NUMBER = re.compile(
    r"^(\d{1,2}(\.\d{1,2})+|[A-Z]\.\d{1,2}(\.\d{1,2})*)\.?(\s*[A-Z]\w|\s+[a-z])"
)


def heading_level(texts: list[str], *, size: float, spaced: bool, reach: float) -> int | None:
    """Heading level (1 = largest) or None. ``size``: the lines' height over body text's;
    ``spaced``: space above it (or first in its column); ``reach``: its longest line over the
    column's width."""
    text = " ".join(texts)
    if len(texts) > 2 or sum(c.isalpha() for c in text) < 1 or text[-1] in SENTENCE_END:
        return None
    if numbered(texts):
        return min(4, SECTION_NUMBER.match(text).group(1).count(".") + 1)  # type: ignore[union-attr]
    if spaced and size >= HEADING_RATIO and (reach < SHORT_LINE or size >= LARGE_RATIO):
        return 1 if size >= TITLE_RATIO else 2
    return None


def numbered(texts: list[str]) -> bool:
    """ "5.2 Managing packages": a section number with a dot inside, on one line that is no
    sentence nor a contents entry ending in its page number."""
    last = texts[0][-1:]
    return len(texts) == 1 and bool(SECTION_NUMBER.match(texts[0])) and last not in ".,;:0123456789"
