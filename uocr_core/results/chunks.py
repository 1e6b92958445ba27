"""Chunks for retrieval (``format=chunks``, JSON lines): the document's Markdown cut where its
structure allows, each chunk with its heading path and where it was read from.

A chunk is a run of the Markdown's blocks (paragraphs, list items, tables, code, headings):
- a heading starts a new chunk, and every chunk carries the path of headings it sits under;
- blocks are added while the chunk stays within its size (``measure``: characters, 1,500 by
  default, or a tokenizer's tokens); a paragraph longer than that is cut at sentence ends (else
  at spaces), while a table or a code block is kept whole;
- a paragraph that runs on from one page to the next (its first half ends mid-sentence, the
  second starts in lower case, or in Chinese or Japanese) is one block, so its chunk lists both
  pages.

Provenance: ``spans`` are the chunk's pieces as ``[start, end)`` offsets (code points) into
result.md, in order and never overlapping; between the chunks' spans lie only the page
markers and blank lines, so the chunks cover every other character of the Markdown once.
``pages`` and ``boxes`` (each a page and a box in that page's pixels) are those of the page
blocks the chunk's text came from. Written page by page like the other text formats: memory
holds one page and the chunk being filled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from uocr_core.contracts import Block, PageResult
from uocr_core.results import markdown
from uocr_core.results.measure import Chars, Measure

FURNITURE = frozenset({"header", "footer", "page_number"})  # not in the Markdown
_HEADING = re.compile(r"^(#{1,6}) +(.*)$")
_FENCE = re.compile(r"^(```|~~~)")
_SPACE = re.compile(r"\s+")
# A sentence ends at a stop and a space, or at a CJK full stop, which needs none after it.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ENDS_SENTENCE = re.compile(r"[.!?:;。！？：；)\]\"'”」』]$")


@dataclass
class _Piece:
    """A block of one page's Markdown, or a part of one, at ``start`` in result.md."""

    text: str
    start: int
    page: int
    kind: str  # "heading", "text", "whole" (a table or code: never cut)
    level: int = 0
    boxes: list[tuple[int, tuple[float, ...]]] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass
class _Chunk:
    headings: list[str]
    pieces: list[_Piece] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)  # what goes between piece n-1 and piece n
    size: int = 0  # by the writer's measure


def write_chunks(results: Iterable[PageResult], out: TextIO, measure: Measure) -> None:
    """The document's chunks at ``measure``'s size, from its page results in order (what the
    API does for a size other than the one written at assembly)."""
    writer, at = ChunkWriter(out, measure), 0
    for n, result in enumerate(results):
        marker, body = markdown.page_parts(result, first=n == 0)
        writer.page(result, body, at + len(marker))
        at += len(marker) + len(body)
    writer.close()


class ChunkWriter:
    """Feed it each page's Markdown body with its offset in result.md, then ``close``."""

    def __init__(self, out: TextIO, measure: Measure | None = None) -> None:
        self.out, self.measure = out, measure or Chars()
        self.outline: list[tuple[int, str]] = []  # (level, heading) of the headings open here
        self.chunk = _Chunk([])
        self.count = 0

    def page(self, result: PageResult, body: str, start: int) -> None:
        """``body``: the page's Markdown as result.md holds it, from offset ``start``."""
        pieces = _pieces(body, start, result.page)
        _attach_boxes(pieces, result)
        for n, piece in enumerate(pieces):
            continued = n == 0 and self._runs_on(piece)
            self._add(piece, continued)

    def close(self) -> None:
        self._flush()

    def _runs_on(self, piece: _Piece) -> bool:
        last = self.chunk.pieces[-1] if self.chunk.pieces else None
        return (
            last is not None
            and last.kind == piece.kind == "text"
            and last.page != piece.page
            and not _ENDS_SENTENCE.search(last.text)
            and (piece.text[:1].islower() or _CJK.match(piece.text) is not None)
        )

    def _add(self, piece: _Piece, continued: bool) -> None:
        if piece.kind == "heading":
            self._flush()
            # A heading closes every open one of its level or deeper, whatever levels it skips.
            self.outline = [(n, t) for n, t in self.outline if n < piece.level]
            self.outline.append((piece.level, _heading_text(piece.text)))
            self.chunk = _Chunk(self.headings)
        measure = self.measure
        room = measure.limit
        if self.chunk.pieces and self._only_headings():  # the text beside its heading
            room = max(measure.limit - self.chunk.size - measure.join, measure.limit // 4)
        for part in _cut(piece, measure, room):
            size = measure.size(part.text)
            fits = self.chunk.size + measure.join + size <= measure.limit
            if self.chunk.pieces and not continued and not fits and not self._only_headings():
                self._flush()
                self.chunk = _Chunk(self.headings)
            if self.chunk.pieces:
                join = " " if continued else "\n\n"
                self.chunk.joins.append(join)
                self.chunk.size += measure.size(join) if continued else measure.join
            self.chunk.pieces.append(part)
            self.chunk.size += size
            continued = False

    @property
    def headings(self) -> list[str]:
        return [text for _, text in self.outline]

    def _only_headings(self) -> bool:
        """A heading stays with the text under it, however long that is."""
        return all(p.kind == "heading" for p in self.chunk.pieces)

    def _flush(self) -> None:
        chunk = self.chunk
        if not chunk.pieces:
            return
        text = chunk.pieces[0].text + "".join(
            join + piece.text for join, piece in zip(chunk.joins, chunk.pieces[1:], strict=True)
        )
        boxes = [(page, box) for piece in chunk.pieces for page, box in piece.boxes]
        record: dict[str, Any] = {
            "chunk": self.count,
            "text": text,
            "headings": chunk.headings,
            "pages": sorted({piece.page for piece in chunk.pieces}),
            "boxes": [{"page": page, "bbox": list(box)} for page, box in boxes],
            "spans": [[piece.start, piece.end] for piece in chunk.pieces],
        }
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.count += 1
        self.chunk = _Chunk(self.headings)


def _pieces(body: str, start: int, page: int) -> list[_Piece]:
    """The body's blocks: runs of lines between blank lines, a fenced block whole whatever
    blank lines it holds."""
    pieces: list[_Piece] = []
    lines = body.split("\n")
    offset, n = start, 0
    while n < len(lines):
        if not lines[n].strip():
            offset += len(lines[n]) + 1
            n += 1
            continue
        first = n
        if _FENCE.match(lines[n]):
            n += 1
            while n < len(lines) and not _FENCE.match(lines[n]):
                n += 1
            n = min(n + 1, len(lines))
        else:
            while n < len(lines) and lines[n].strip():
                n += 1
        text = "\n".join(lines[first:n])
        pieces.append(_piece(text, offset, page))
        offset += len(text) + 1
    return pieces


def _piece(text: str, start: int, page: int) -> _Piece:
    heading = _HEADING.match(text)
    if heading and "\n" not in text:
        return _Piece(text, start, page, "heading", level=len(heading.group(1)))
    whole = _FENCE.match(text) or text.startswith("|") or text.lstrip().startswith("<table")
    return _Piece(text, start, page, "whole" if whole else "text")


def _heading_text(text: str) -> str:
    match = _HEADING.match(text)
    return match.group(2).strip() if match else text


def _cut(piece: _Piece, measure: Measure, room: int) -> list[_Piece]:
    """A text block too long for a chunk, in parts at sentence ends (else at spaces), each with
    its own offset and the block's box (a block has one box, around every part). The first
    part fits ``room`` (what a heading leaves beside it), the others the measure's limit."""
    if piece.kind != "text" or measure.size(piece.text) <= room:
        return [piece]
    parts: list[_Piece] = []
    begin = 0
    while measure.size(piece.text[begin:]) > room:
        fit = measure.fitting(piece.text, begin, room)
        window = piece.text[begin : begin + fit + 1]
        stop = begin + (_last_end(_SENTENCE_END, window) or _last_end(_SPACE, window) or fit)
        parts.append(_part(piece, begin, stop))
        begin, room = stop, measure.limit
    parts.append(_part(piece, begin, len(piece.text)))
    parts = [part for part in parts if part.text]
    for part in parts:
        part.boxes = list(piece.boxes)
    return parts


def _last_end(pattern: re.Pattern[str], window: str) -> int | None:
    """The last match's end in the window's second half (a cut earlier leaves a stub: "Dr. ")."""
    ends = [m.end() for m in pattern.finditer(window) if m.end() > len(window) // 2]
    return ends[-1] if ends else None


def _part(piece: _Piece, begin: int, stop: int) -> _Piece:
    """``piece.text[begin:stop]`` without its trailing spaces (they lie between the parts)."""
    text = piece.text[begin:stop]
    lead = len(text) - len(text.lstrip())
    return _Piece(text.strip(), piece.start + begin + lead, piece.page, "text")


def _attach_boxes(pieces: list[_Piece], result: PageResult) -> None:
    """Each page block's box to the piece its text starts in, found in order: a block's first
    words, as the Markdown writes them, in the piece at or after the last one matched."""
    if not pieces or not result.width:
        return
    searched = [_plain(piece.text) for piece in pieces]  # each piece's words, once a page
    at = 0
    for block in result.blocks:
        if block.label in FURNITURE or not block.text.strip():
            continue
        found = _find(searched, at, block)
        if found is not None:
            at = found
            pieces[found].boxes.append((result.page, tuple(round(v, 1) for v in block.bbox)))


def _find(searched: list[str], at: int, block: Block) -> int | None:
    """The first of the pieces (``_plain`` text) from ``at`` holding the block's first three
    words, else its first word."""
    words = _plain(block.text).split()[:3]
    for count in (3, 1):
        key = " ".join(words[:count])
        for n in range(at, len(searched)):
            if key and key in searched[n]:
                return n
    return None


def _plain(text: str) -> str:
    """Words as the Markdown and a block's text share them: escapes gone, one space apart."""
    return " ".join(text.replace("\\", "").split())
