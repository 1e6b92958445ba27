"""Markdown a reader accepts: headings, paragraphs joined as a reader would, lists, fenced code,
pipe tables, and body text that merely looks like Markdown syntax escaped.

Page furniture (running heads and feet, page numbers) stays out of the Markdown body: it is in
the page's blocks and text, labelled, but a paragraph running across pages must not carry it.
"""

from __future__ import annotations

import re

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.spacing import separator

FURNITURE = ("header", "footer", "page_number")
# At the start of a line these would turn body text into a heading, quote, list, or rule.
_LOOKS_LIKE_SYNTAX = re.compile(r"^(#{1,6}(?=\s|$)|>|[-+*](?=\s)|\d{1,9}[.)](?=\s)|[=-]{3,}\s*$)")
# "pack-" + "ages": a word broken at the line's end; not "apt-" + "Get" or "x-" + "1".
_BROKEN_WORD = re.compile(r"[a-z]-$")
_LIST_BULLET = re.compile(r"^[\u2022\u00b7\u25aa\u25e6\u2013*+-]\s*")


def render(blocks: list[LayoutBlock]) -> str:
    """Blocks apart by a blank line; a list's items one per line (a tight list)."""
    out, previous = "", ""
    for block in blocks:
        part = _block(block) if block.label not in FURNITURE else ""
        if part:
            tight = previous == block.label == "list"
            out += ("\n" if tight else "\n\n") + part if out else part
            previous = block.label
    return out


def _block(block: LayoutBlock) -> str:
    if block.label == "title":
        return "#" * block.level + " " + _flow([line.text for line in block.lines])
    if block.label == "code":
        return _code(block)
    if block.label == "table":
        return _table(block.rows)
    if block.label == "list":
        item = _flow([line.text for line in block.lines])
        return "- " + escape_text(_LIST_BULLET.sub("", item)) if _LIST_BULLET.match(item) else item
    return escape_text(_flow([line.text for line in block.lines]))


def _flow(lines: list[str]) -> str:
    """Wrapped lines joined: Chinese without a space, a broken word without its hyphen."""
    out = ""
    for line in lines:
        if _BROKEN_WORD.search(out) and line[:1].islower():
            out = out[:-1] + line
        else:
            out += separator(out, line) + line
    return out


def escape_text(text: str) -> str:
    """A backslash before the mark ("\\# ", "\\> "); an ordered-list number keeps its digits and
    has its dot escaped ("2024\\. was"), since a backslash before a digit is a literal one."""
    match = _LOOKS_LIKE_SYNTAX.match(text)
    if match is None:
        return text
    mark = match.group(0)
    if mark[0].isdigit():
        return mark[:-1] + "\\" + mark[-1] + text[len(mark) :]
    return "\\" + text


def _code(block: LayoutBlock) -> str:
    """Fenced, each line indented by its offset from the block's left edge in characters."""
    # The listing's own margin: where two or more of its lines start (a margin note or a label
    # further left must not indent every line).
    edges = sorted(line.x1 for line in block.lines)
    shared = [
        a for a, b in zip(edges, edges[1:], strict=False) if b - a < block.lines[0].height / 2
    ]
    left = shared[0] if shared else edges[0]
    widths = [(line.x2 - line.x1) / len(line.text) for line in block.lines if len(line.text) >= 8]
    char = sorted(widths)[len(widths) // 2] if widths else 0.0
    body = [
        " " * (max(0, round((line.x1 - left) / char)) if char else 0) + line.text
        for line in block.lines
    ]
    fence = "~~~" if any("```" in line for line in body) else "```"
    return "\n".join([fence, *body, fence])


def _table(rows: list[list[str]]) -> str:
    cells = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    head, *rest = cells
    lines = [_row(head), _row(["---"] * len(head)), *(_row(row) for row in rest)]
    return "\n".join(lines)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
