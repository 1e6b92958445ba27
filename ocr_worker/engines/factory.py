"""Building the configured engine. Torch is imported only when the GPU engine is chosen."""

from __future__ import annotations

from ocr_api.core.settings import Settings
from ocr_worker.engines.base import OcrEngine


def make_engine(settings: Settings, *, in_process: bool = False) -> OcrEngine:
    """``in_process``: here even when the settings ask for an engine process (its child)."""
    if settings.engine == "rapidocr":
        from ocr_worker.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine(threads=settings.worker.rapidocr_threads)
    if (
        settings.engine == "unlimited_ocr"
        and settings.unlimited_ocr.engine_process
        and not in_process
    ):
        from ocr_worker.engines.engine_process import EngineProcess

        return EngineProcess(settings)
    if settings.engine == "unlimited_ocr":
        from ocr_worker.engines.unlimited_ocr.engine import UnlimitedOcrEngine  # type: ignore[import-not-found]

        return UnlimitedOcrEngine.from_settings(settings)  # type: ignore[no-any-return]
    raise ValueError(f"unknown engine {settings.engine!r}")
