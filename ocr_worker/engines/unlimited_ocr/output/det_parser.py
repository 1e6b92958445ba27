"""Parsing the model's layout grammar into blocks and Markdown (torch-free).

Per block: ``<|det|>LABEL [x1, y1, x2, y2]<|/det|>`` then its content, coordinates 0-999 of the
page (x / 999 * width). Tables come as HTML. Text before any det tag is kept as a text block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from uocr_core.contracts import Block

# A label is any run of non-space characters, as in transformers' processor ("figure/chart").
DET = re.compile(
    r"<\|det\|>\s*(\S+?)\s*\[\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)\s*\]\s*<\|/det\|>"
)
SPECIAL = re.compile(r"<\|/?(?:ref|det|grounding)\|>|<PAGE>")


@dataclass(frozen=True)
class ParsedPage:
    blocks: list[Block]
    markdown: str
    text: str


def parse_page(raw: str, *, width: int, height: int) -> ParsedPage:
    blocks: list[Block] = []
    matches = list(DET.finditer(raw))
    lead = raw[: matches[0].start()] if matches else raw
    if lead.strip():
        blocks.append(
            Block(label="text", bbox=(0, 0, float(width), float(height)), text=_clean(lead))
        )
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(raw)
        label = match.group(1)
        x1, y1, x2, y2 = (float(v) for v in match.groups()[1:])
        bbox = (x1 / 999 * width, y1 / 999 * height, x2 / 999 * width, y2 / 999 * height)
        blocks.append(
            Block(
                label=label,
                bbox=tuple(round(v, 1) for v in bbox),  # type: ignore[arg-type]
                text=_clean(raw[match.end() : end]),
            )
        )
    markdown = "\n\n".join(md for md in (_markdown(b) for b in blocks) if md)
    text = "\n".join(b.text for b in blocks if b.text and b.label != "image")
    return ParsedPage(blocks, markdown, text)


def _clean(text: str) -> str:
    return SPECIAL.sub("", text).strip()


def _markdown(block: Block) -> str:
    if block.label == "title":
        return "## " + block.text
    if block.label == "image":
        return ""
    return block.text  # tables stay HTML, which Markdown renders
