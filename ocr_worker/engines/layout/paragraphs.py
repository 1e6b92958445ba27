"""A flow's lines become blocks: tables, then paragraphs, list items, headings and code.

Only the Markdown (and the blocks' boxes) depend on where a paragraph ends: the page's text is
its lines in order either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import median

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.lines import Line, line_pitch
from ocr_worker.engines.layout.tables import find_tables, table_block

# Inside a paragraph baselines are one pitch apart; a paragraph or section break adds at least
# half a line (DocBook and Texinfo put a blank half line or more between paragraphs).
PARAGRAPH_GAP = 1.4
# A first-line indent or a nested item starts at least an em in; a ragged left edge from the
# detector's padding moves a few pixels, far less than one line height.
INDENT = 0.8
# LaTeX's \large is 1.2 times body text, its headings' smallest step up; 1.15 leaves room for the
# detector's few pixels of padding but not for a body line it measured tall.
HEADING_RATIO = 1.15
LIST_ITEM = re.compile(r"^([\u2022\u00b7\u25aa\u25e6\u2013*+-]|\(?\d{1,3}[.)]|\(?[a-z][)])\s")
SECTION_NUMBER = re.compile(r"^(\d{1,2}(\.\d{1,2})+|[A-Z]\.\d{1,2}(\.\d{1,2})*)\.?\s+\S")
CODE_START = re.compile(r"^(\$|#|%|>>>|//|/\*)\s")
CODE_CHARS = set("{}[]()<>=;$#/\\_|\"'`~&*")


def flow_blocks(lines: Sequence[Line], unit: float, body_height: float) -> list[LayoutBlock]:
    blocks: list[LayoutBlock] = []
    done = 0
    for span in find_tables(lines, unit):
        blocks += _prose(lines[done : span.start], unit, body_height)
        blocks.append(table_block(lines[span.start : span.end], span.cuts))
        done = span.end
    return blocks + _prose(lines[done:], unit, body_height)


def _prose(lines: Sequence[Line], unit: float, body_height: float) -> list[LayoutBlock]:
    if not lines:
        return []
    pitch = line_pitch(lines)
    margin = min(line.x1 for line in lines)
    groups: list[list[Line]] = []
    for line in lines:
        if groups and _continues(groups[-1], line, pitch, unit):
            groups[-1].append(line)
        else:
            groups.append([line])
    return [_label(group, margin, unit, body_height) for group in groups]


def _continues(group: list[Line], line: Line, pitch: float, unit: float) -> bool:
    previous = group[-1]
    if line.cy - previous.cy > PARAGRAPH_GAP * pitch:
        return False
    if not _similar(previous.height, line.height) or LIST_ITEM.match(line.text):
        return False
    if len(group) == 1 and _numbered_heading(group):  # a same-size heading and its first line
        return False
    indented = line.x1 - previous.x1 > INDENT * unit
    if LIST_ITEM.match(group[0].text):  # an item's wrapped lines hang under its text
        return line.x1 > group[0].x1 - INDENT * unit
    return not indented or _is_code(group + [line])


def _similar(a: float, b: float) -> bool:
    return max(a, b) < HEADING_RATIO * min(a, b)


def _label(group: list[Line], margin: float, unit: float, body_height: float) -> LayoutBlock:
    first = group[0].text
    size = median(line.height for line in group) / max(body_height, 1e-6)
    if len(group) <= 2 and (size >= HEADING_RATIO or _numbered_heading(group)):
        return LayoutBlock("title", group, level=_level(first, size))
    if LIST_ITEM.match(first):
        return LayoutBlock("list", group)
    if group[0].x1 - margin > INDENT * unit and _is_code(group) or CODE_START.match(first):
        return LayoutBlock("code", group)
    return LayoutBlock("text", group)


def _numbered_heading(group: list[Line]) -> bool:
    """ "5.2 Managing packages": a section number with a dot inside and a short line after it,
    not a sentence."""
    text = " ".join(line.text for line in group)
    return bool(SECTION_NUMBER.match(text)) and len(group) == 1 and not text.endswith(".")


def _level(text: str, size: float) -> int:
    number = SECTION_NUMBER.match(text)
    if number:
        return min(4, number.group(1).count(".") + 1)
    # LaTeX's steps: \huge 2.07, \LARGE 1.73, \Large 1.44, \large 1.2 times body text.
    return 1 if size >= 1.6 else 2 if size >= 1.3 else 3


def _is_code(group: list[Line]) -> bool:
    """Code reads as symbols: braces, operators, paths, prompts."""
    text = "".join(line.text for line in group)
    symbols = sum(char in CODE_CHARS for char in text)
    return bool(text) and symbols / len(text) >= 0.08
