"""One model version over a labelled set, through the pipeline the workers run.

Each document goes through ``embedded.run_document`` (the submit path, the worker's rendering at
``worker.render_dpi``, the engine, assembly into pages) with the version's engine, built once
for the whole set; the pages that come back are scored against the set's ground truth.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ocr_worker.accuracy.dataset import Dataset, DatasetError, LabelledDocument
from ocr_worker.accuracy.scoring import (
    PageScore,
    document_cer,
    page_order_ok,
    reference_text,
    score_page,
)
from ocr_worker.embedded import run_document
from ocr_worker.engines.base import OcrEngine
from ocr_worker.engines.factory import make_engine
from uocr_core.errors import DomainError
from uocr_core.model_versions import settings_for
from uocr_core.settings import Settings


@dataclass(frozen=True)
class DocumentRun:
    """What one version made of one document."""

    doc_id: str
    pages_expected: int
    pages_returned: int  # pages that came back read (a failed page is not)
    order_ok: bool  # page count right and every page closest to its own ground truth
    scores: list[PageScore]  # one per expected page; a missing page scores as empty
    seconds: float  # the document's wall time through the pipeline

    @property
    def cer(self) -> float:
        return document_cer(self.scores)


@dataclass(frozen=True)
class VersionRun:
    version: str
    engines: tuple[str, ...]  # the engines the pages record (one, unless something is wrong)
    documents: list[DocumentRun]

    @property
    def cer(self) -> float:
        """Over every character of every document: a long document weighs more."""
        return document_cer([score for doc in self.documents for score in doc.scores])

    @property
    def pages_per_second(self) -> float:
        seconds = sum(doc.seconds for doc in self.documents)
        return sum(doc.pages_returned for doc in self.documents) / seconds if seconds else 0.0

    def document(self, doc_id: str) -> DocumentRun:
        return next(doc for doc in self.documents if doc.doc_id == doc_id)


ProgressHook = Callable[[str, DocumentRun], None]


def evaluate_version(
    dataset: Dataset, settings: Settings, version: str, *, on_document: ProgressHook | None = None
) -> VersionRun:
    """``version`` (a name in ``models.versions``) over the whole set; KeyError if unknown."""
    version_settings = settings_for(settings, version)
    engine = make_engine(version_settings)
    return evaluate_engine(dataset, version_settings, engine, version, on_document=on_document)


def evaluate_engine(
    dataset: Dataset,
    settings: Settings,
    engine: OcrEngine,
    label: str,
    *,
    on_document: ProgressHook | None = None,
) -> VersionRun:
    """``engine`` over the set, labelled ``label`` in the report."""
    runs, engines = [], set()
    with tempfile.TemporaryDirectory(prefix="uocr-eval-") as tmp:
        for doc in dataset.documents:
            run, doc_engines = _run_document(doc, settings, engine, Path(tmp) / doc.doc_id)
            runs.append(run)
            engines |= doc_engines
            if on_document:
                on_document(label, run)
    return VersionRun(label, tuple(sorted(engines)), runs)


def _run_document(
    doc: LabelledDocument, settings: Settings, engine: OcrEngine, work_dir: Path
) -> tuple[DocumentRun, set[str]]:
    started = time.perf_counter()
    try:
        run_document(doc.file, work_dir, settings, engine=engine)
    except DomainError as error:  # refused as the API would refuse it: not a document
        raise DatasetError(f"document {doc.doc_id!r} ({doc.file}): {error.message}") from None
    seconds = time.perf_counter() - started
    pages = [json.loads(line) for line in _lines(work_dir / "pages.jsonl")]
    texts = [str(page.get("text", "")) for page in pages]
    references = [reference_text(text) for text in doc.ground_truth]
    padded = (texts + [""] * doc.pages)[: doc.pages]
    run = DocumentRun(
        doc_id=doc.doc_id,
        pages_expected=doc.pages,
        pages_returned=sum(page.get("status") == "succeeded" for page in pages),
        order_ok=page_order_ok(texts, references),
        scores=[score_page(text, ref) for text, ref in zip(padded, references, strict=True)],
        seconds=seconds,
    )
    return run, {str(page["engine"]) for page in pages if page.get("engine")}


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
