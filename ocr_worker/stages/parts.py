"""What a page group's stages work with: this worker's database, object store, dispatcher,
engine, settings and renderers, gathered by the driver (``pipeline.py``) for each group and
handed to every stage, which takes from it only what it uses."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.engines.base import OcrEngine
from ocr_worker.imaging import PageRasterizer, ProcessRasterizer
from uocr_core.dispatch import Dispatcher
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore


@dataclass(frozen=True)
class StageParts:
    sessions: sessionmaker[Session]
    store: ObjectStore
    dispatcher: Dispatcher
    engine: OcrEngine
    settings: Settings
    worker_id: str
    # The model version this worker serves: it runs only that version's jobs, and every page
    # it records says so (with the engine), in the status and in the results.
    model_version: str
    rasterizer: PageRasterizer
    render_pool: ProcessRasterizer | None  # CPU processes for renders and PDFs, if any
