"""One document through both readers on the same pixels: bare RapidOCR and ``uocr run``.

uocr rasterises the scanned PDF itself (``ocr_worker.imaging.PageRasterizer`` at
``worker.render_dpi``); bare RapidOCR is given the very pixels that rasteriser returns, so the
only difference left between the two is what uocr does after recognition.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pymupdf

from bench.accuracy.corpus import SourceDocument
from bench.accuracy.scan import scan_document
from ocr_worker.accuracy.scoring import (
    LineOrder,
    PageScore,
    document_cer,
    line_order,
    page_order_ok,
    reference_text,
    rows_kept,
    score_page,
)
from ocr_worker.embedded import run_document
from ocr_worker.stages.render import rasterizer_for
from uocr_core.settings import Settings
from uocr_core.storage import LocalObjectStore

SCAN_KEY = "scan.pdf"


@dataclass(frozen=True)
class ScannedDocument:
    source: SourceDocument
    pdf: bytes  # image-only, one scan per chosen page
    text_layers: list[str]  # the original pages' own text, as PyMuPDF extracts it
    references: list[str]  # the ground truth: reference_text of each text layer
    rows: list[list[list[str]]]  # each page's rows of two or more cells (table_rows)


def scan(source: SourceDocument, variant: int = 0, feed_turn: int = 0) -> ScannedDocument:
    with pymupdf.open(source.pdf_path) as original:
        # Content-stream order: TeX writes a page in reading order (columns one after another).
        layers = [original.load_page(i).get_text(sort=False) for i in source.pages]
        rows = [table_rows(original.load_page(i)) for i in source.pages]
        pdf = scan_document(original, source.doc_id, source.pages, variant, feed_turn)
    return ScannedDocument(source, pdf, layers, [reference_text(t) for t in layers], rows)


# Cells on one row: their baselines within this share of the text's height of each other.
ROW_BASELINE = 0.3


def table_rows(page: pymupdf.Page) -> list[list[str]]:
    """The page's rows of two or more cells, each left to right, from its own text: a cell is
    a line of the text layer (TeX writes each cell's line apart), a row the cells that share a
    baseline and follow each other in the text layer (two tables side by side share baselines,
    but the layer lists one table, then the other). Prose lines are one cell and are left out;
    so are single characters, and rows of under 8 characters."""
    cells: dict[tuple[int, int], list[tuple[float, float, float, float, str]]] = {}
    for x0, y0, x1, y1, word, block, line, _ in page.get_text("words", sort=False):
        cells.setdefault((block, line), []).append((x0, y0, x1, y1, word))
    placed = sorted(
        (max(w[3] for w in words), min(w[0] for w in words), max(w[3] - w[1] for w in words),
         order, " ".join(w[4] for w in words))
        for order, words in enumerate(cells.values())
    )  # fmt: skip
    lines: list[list[tuple[float, int, str]]] = []
    baseline = float("-inf")
    for bottom, left, height, order, text in placed:
        if lines and bottom - baseline <= ROW_BASELINE * height:
            lines[-1].append((left, order, text))
        else:
            lines.append([(left, order, text)])
            baseline = bottom
    rows = [row for line in lines for row in _consecutive(sorted(line))]
    # A lone glyph or digit ("„", "9") is no cell to look for: OCR reads it as anything.
    rows = [[cell for cell in row if len(cell.replace(" ", "")) >= 2] for row in rows]
    return [row for row in rows if len(row) >= 2 and len("".join(row)) >= 8]


def _consecutive(line: list[tuple[float, int, str]]) -> list[list[str]]:
    """A line's cells, left to right, cut where the text layer's order jumps."""
    runs: list[list[str]] = []
    previous = None
    for _, order, text in line:
        if previous is None or not 0 < order - previous <= 2:
            runs.append([])
        runs[-1].append(text)
        previous = order
    return runs


def render_like_uocr(pdf: bytes, settings: Settings) -> list[np.ndarray]:
    """(H, W, 3) RGB pixels of every page, rendered by uocr's own rasteriser and settings."""
    with tempfile.TemporaryDirectory() as tmp, pymupdf.open(stream=pdf, filetype="pdf") as doc:
        store = LocalObjectStore(Path(tmp))
        store.put(SCAN_KEY, pdf)
        rasterizer = rasterizer_for(store, settings)
        return [rasterizer.render(SCAN_KEY, index) for index in range(doc.page_count)]


@dataclass(frozen=True)
class Detections:
    """RapidOCR's raw output for one page, in its own order."""

    boxes: list[list[list[float]]]  # one quadrilateral [[x, y] x 4] per line
    txts: list[str]
    scores: list[float]

    @property
    def text(self) -> str:
        return "\n".join(self.txts)


class BareRapidOcr:
    """RapidOCR as its users call it, with only the text-angle classifier off (on, it flips
    whole lines of clean pages: docs/cpu-engine.md)."""

    def __init__(self) -> None:
        from rapidocr import RapidOCR

        self._ocr = RapidOCR(params={"Global.use_cls": False, "Global.log_level": "warning"})

    def detect(self, pixels: np.ndarray) -> Detections:
        output: Any = self._ocr(pixels)
        if output.boxes is None or output.txts is None:
            return Detections([], [], [])
        return Detections(
            [[[float(x), float(y)] for x, y in quad] for quad in output.boxes],
            [str(t) for t in output.txts],
            [float(s) for s in output.scores],
        )


def run_uocr(pdf: bytes, work_dir: Path, settings: Settings) -> list[str]:
    """``uocr run`` on the scanned PDF: each page's text in the order pages.jsonl lists them."""
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / "scan.pdf"
    path.write_bytes(pdf)
    run_document(path, work_dir / "out", settings)
    lines = (work_dir / "out" / "pages.jsonl").read_text(encoding="utf-8").splitlines()
    return [str(json.loads(line)["text"]) for line in lines if line.strip()]


@dataclass(frozen=True)
class DocumentResult:
    doc_id: str
    bare: list[PageScore]
    uocr: list[PageScore]
    pages_expected: int
    pages_returned: int
    order_ok: bool  # page count right and every page closest to its own ground truth
    bare_texts: list[str]
    uocr_texts: list[str]
    references: list[str]
    # How each page's lines come out: found whole, kept in order (scoring.line_order).
    order_bare: list[LineOrder]
    order_uocr: list[LineOrder]
    # The share of each page's table rows written whole in one line (scoring.rows_kept).
    rows_bare: list[float | None]
    rows_uocr: list[float | None]

    def lines(self, reader: str, share: str) -> float:
        """The pages' mean share (``found`` or ``in_order``) for ``bare`` or ``uocr``."""
        orders = self.order_bare if reader == "bare" else self.order_uocr
        return mean_share([getattr(order, share) for order in orders])

    def rows(self, reader: str) -> float:
        """The pages' mean share of table rows kept whole, for ``bare`` or ``uocr``."""
        return mean_share(self.rows_bare if reader == "bare" else self.rows_uocr)

    @property
    def cer_bare(self) -> float:
        return document_cer(self.bare)

    @property
    def cer_uocr(self) -> float:
        return document_cer(self.uocr)


def evaluate(
    document: ScannedDocument, settings: Settings, work_dir: Path, bare: BareRapidOcr
) -> DocumentResult:
    """Both readers on one scanned document, scored page by page."""
    bare_texts = [bare.detect(p).text for p in render_like_uocr(document.pdf, settings)]
    uocr_texts = run_uocr(document.pdf, work_dir / document.source.doc_id, settings)
    refs, layers = document.references, document.text_layers
    return DocumentResult(
        doc_id=document.source.doc_id,
        bare=[score_page(t, r) for t, r in zip(bare_texts, refs, strict=True)],
        # A missing page scores as empty: every character of its ground truth is an error.
        uocr=[score_page(t, r) for t, r in zip(_padded(uocr_texts, len(refs)), refs, strict=True)],
        pages_expected=len(refs),
        pages_returned=len(uocr_texts),
        order_ok=page_order_ok(uocr_texts, refs),
        bare_texts=bare_texts,
        uocr_texts=uocr_texts,
        references=refs,
        order_bare=[line_order(t, layer) for t, layer in zip(bare_texts, layers, strict=True)],
        order_uocr=[
            line_order(t, layer)
            for t, layer in zip(_padded(uocr_texts, len(refs)), layers, strict=True)
        ],
        rows_bare=[rows_kept(t, r) for t, r in zip(bare_texts, document.rows, strict=True)],
        rows_uocr=[
            rows_kept(t, r)
            for t, r in zip(_padded(uocr_texts, len(refs)), document.rows, strict=True)
        ],
    )


def mean_share(values: list[float | None]) -> float:
    """The pages' mean share (pages with too few lines to say left out)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else 1.0


def _padded(texts: list[str], count: int) -> list[str]:
    return (texts + [""] * count)[:count]
