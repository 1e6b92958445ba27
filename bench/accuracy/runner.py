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


def scan(source: SourceDocument, variant: int = 0, feed_turn: int = 0) -> ScannedDocument:
    with pymupdf.open(source.pdf_path) as original:
        # Content-stream order: TeX writes a page in reading order (columns one after another).
        layers = [original.load_page(i).get_text(sort=False) for i in source.pages]
        pdf = scan_document(original, source.doc_id, source.pages, variant, feed_turn)
    return ScannedDocument(source, pdf, layers, [reference_text(t) for t in layers])


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

    def lines(self, reader: str, share: str) -> float:
        """The pages' mean share (``found`` or ``in_order``) for ``bare`` or ``uocr``."""
        orders = self.order_bare if reader == "bare" else self.order_uocr
        return mean_share([getattr(order, share) for order in orders])

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
    )


def mean_share(values: list[float | None]) -> float:
    """The pages' mean share (pages with too few lines to say left out)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else 1.0


def _padded(texts: list[str], count: int) -> list[str]:
    return (texts + [""] * count)[:count]
