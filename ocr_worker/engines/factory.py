"""Building the configured engine. Torch is imported only when the GPU engine is chosen."""

from __future__ import annotations

from collections.abc import Callable

from ocr_worker.engines.base import OcrEngine
from uocr_core.settings import Settings


def make_engine(settings: Settings, when_lost: Callable[[], None] | None = None) -> OcrEngine:
    """``when_lost``: what a worker does when its engine process cannot be started again."""
    if settings.engine == "rapidocr":
        from ocr_worker.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine(
            threads=settings.worker.rapidocr_threads,
            auto_rotate=settings.worker.auto_rotate_pages,
        )
    if settings.engine == "unlimited_ocr":
        if settings.unlimited_ocr.engine_process:
            from ocr_worker.engines.engine_process import EngineProcess

            return EngineProcess(settings, build=unlimited_ocr_engine, when_lost=when_lost)
        return unlimited_ocr_engine(settings)
    if settings.engine == "simulated":
        from ocr_worker.engines.simulated import SimulatedEngine

        return SimulatedEngine(settings.simulated)
    raise ValueError(f"unknown engine {settings.engine!r}")


def unlimited_ocr_engine(settings: Settings) -> OcrEngine:
    """The GPU engine in this process (in its own, the engine process's child runs this)."""
    from ocr_worker.engines.unlimited_ocr.runtime.engine import (  # type: ignore[import-not-found]
        UnlimitedOcrEngine,
    )

    return UnlimitedOcrEngine.from_settings(settings)  # type: ignore[no-any-return]
