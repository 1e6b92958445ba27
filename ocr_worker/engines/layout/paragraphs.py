"""A flow's lines become blocks: tables first, then paragraphs, list items, headings and code.

Only the Markdown (and the blocks' boxes) depend on where a paragraph ends: the page's text is
its lines in order either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.code import PROMPT, code_line, looks_like_code
from ocr_worker.engines.layout.headings import (
    HEADING_RATIO,
    LARGE_RATIO,
    heading_level,
    numbered,
)
from ocr_worker.engines.layout.lines import Line, line_pitch
from ocr_worker.engines.layout.tables import find_tables, table_block

# Inside a paragraph baselines are one pitch apart; a paragraph or section break adds at least
# half a line (DocBook and Texinfo put a blank half line or more between paragraphs).
PARAGRAPH_GAP = 1.4
# A first-line indent or a nested item starts at least an em in; a ragged left edge from the
# detector's padding moves a few pixels, far less than one line height.
INDENT = 0.8
# A first-line indent is an em or two (LaTeX's \parindent, two ideographs in Chinese): about
# one or two line heights; four is generous, and a centred caption is further in.
MAX_FIRST_INDENT = 4.0
# A listing keeps one blank line inside it (between functions) and stays one block.
CODE_GAP = 2.6
# Twenty characters hold enough ascenders and descenders for a box's height to measure the type.
MEASURED_CHARS = 20
LIST_ITEM = re.compile(r"^([\u2022\u00b7\u25aa\u25e6\u2013*+-]|\(?\d{1,3}[.)]|\(?[a-z][)])\s")


@dataclass(frozen=True)
class _Flow:
    """What a block is judged against: its flow's left margin, width and line pitch."""

    margin: float
    width: float
    pitch: float
    unit: float
    body_height: float


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
    margin = _margin(lines, unit)
    flow = _Flow(margin, max(x.x2 for x in lines) - margin, line_pitch(lines), unit, body_height)
    groups: list[list[Line]] = []
    for line in lines:
        if groups and _continues(groups[-1], line, flow):
            groups[-1].append(line)
        else:
            groups.append([line])
    blocks = []
    for n, group in enumerate(groups):
        spaced = n == 0 or group[0].cy - groups[n - 1][-1].cy > PARAGRAPH_GAP * flow.pitch
        blocks.append(_label(group, flow, spaced))
    return _join_code(blocks, flow)


def _margin(lines: Sequence[Line], unit: float) -> float:
    """The flow's left margin: the leftmost edge where two or more lines start (a lone line
    further left is a footnote mark or a hanging label, not the margin)."""
    edges = sorted(line.x1 for line in lines)
    shared = [a for a, b in zip(edges, edges[1:], strict=False) if b - a <= INDENT * unit]
    return shared[0] if shared else edges[0]


def _continues(group: list[Line], line: Line, flow: _Flow) -> bool:
    previous = group[-1]
    if line.cy - previous.cy > PARAGRAPH_GAP * flow.pitch:
        return False
    if _resized(previous, line):
        return False  # a heading and its text
    if PROMPT.match(group[0].text) and abs(line.x1 - group[0].x1) <= INDENT * flow.unit:
        return True  # a transcript: prompts, continuations ("+ x + 5") and output alike
    if LIST_ITEM.match(line.text) or (len(group) == 1 and numbered([group[0].text])):
        return False
    if LIST_ITEM.match(group[0].text):  # an item's wrapped lines hang under its text
        return line.x1 > group[0].x1 - INDENT * flow.unit
    block_indented = all(_indented(x, flow) for x in group)
    if block_indented and line.x1 < min(x.x1 for x in group) - INDENT * flow.unit:
        # After a first-line indent; else an indented block (code, a quote) or a centred line
        # (a caption) ends.
        first_indent = group[0].x1 - line.x1 <= MAX_FIRST_INDENT * flow.unit
        return len(group) == 1 and first_indent and not code_line(group[0].text)
    if line.x1 - previous.x1 > INDENT * flow.unit:  # a new paragraph, unless code nests
        return looks_like_code([x.text for x in group], indented=True) and code_line(line.text)
    return True


def _resized(a: Line, b: Line) -> bool:
    """A change of type size. A short line's box is no measure of its size (no ascenders or
    descenders in "operator as in" shrink it by a tenth or more), so a small step counts only
    between lines of some length; a large one always does."""
    ratio = max(a.height, b.height) / max(min(a.height, b.height), 1e-6)
    measured = min(len(a.text), len(b.text)) >= MEASURED_CHARS
    return ratio >= LARGE_RATIO or (ratio >= HEADING_RATIO and measured)


def _indented(line: Line, flow: _Flow) -> bool:
    return line.x1 - flow.margin > INDENT * flow.unit


def _label(group: list[Line], flow: _Flow, spaced: bool) -> LayoutBlock:
    texts = [line.text for line in group]
    size = median(line.height for line in group) / max(flow.body_height, 1e-6)
    reach = max(line.x2 - line.x1 for line in group) / max(flow.width, 1e-6)
    level = heading_level(texts, size=size, spaced=spaced, reach=reach)
    if level is not None:
        return LayoutBlock("title", group, level=level)
    if LIST_ITEM.match(texts[0]):
        return LayoutBlock("list", group)
    if looks_like_code(texts, indented=all(_indented(line, flow) for line in group)):
        return LayoutBlock("code", group)
    return LayoutBlock("text", group)


def _join_code(blocks: list[LayoutBlock], flow: _Flow) -> list[LayoutBlock]:
    """Pieces of one listing (split where its indentation changed) back into one block."""
    joined: list[LayoutBlock] = []
    for block in blocks:
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.label == block.label == "code"
            and block.lines[0].cy - last.lines[-1].cy <= CODE_GAP * flow.pitch
        ):
            last.lines.extend(block.lines)
        else:
            joined.append(block)
    return joined
