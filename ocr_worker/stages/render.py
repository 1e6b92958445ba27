"""Rendering a claimed group's pages: each page's image (or why it has none), drawn no larger
than the engine reads, in CPU processes beside the task when there are some."""

from __future__ import annotations

from ocr_worker.engines.base import PageImage
from ocr_worker.imaging import (
    PageRasterizer,
    PageRenderError,
    ProcessRasterizer,
    RenderedPage,
    render_many,
)
from ocr_worker.stage_clock import clock
from ocr_worker.stages.claim import PageRef
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore

RenderFlags = dict[int, tuple[str, ...]]  # the render's warnings (a repaired file) by page number


def rasterizer_for(store: ObjectStore, settings: Settings) -> PageRasterizer:
    w = settings.worker
    return PageRasterizer(store, dpi=w.render_dpi, max_side=w.max_render_side)


def render_pool_for(settings: Settings, metrics: WorkerMetrics | None) -> ProcessRasterizer | None:
    """CPU processes for the renders, when the settings ask for some (else the task renders)."""
    w = settings.worker
    if not w.render_processes:
        return None
    return ProcessRasterizer(
        settings.s3,
        dpi=w.render_dpi,
        max_side=w.max_render_side,
        processes=w.render_processes,
        metrics=metrics,
    )


def render_pages(
    refs: list[PageRef],
    *,
    long_side: int | None,
    rasterizer: PageRasterizer,
    render_pool: ProcessRasterizer | None,
) -> tuple[list[PageImage | PageRenderError], RenderFlags]:
    """Each page's image (or why it has none), and the render's flags by page number."""
    keys = [(ref.source_key, ref.source_index) for ref in refs]
    with clock.timed("render"):
        rendered = (
            render_pool.render_many(keys, long_side)
            if render_pool
            else render_many(rasterizer, keys, long_side)
        )
    flags = {
        ref.page_no: r.warnings
        for ref, r in zip(refs, rendered, strict=True)
        if isinstance(r, RenderedPage) and r.warnings
    }
    images = [
        r if isinstance(r, PageRenderError) else PageImage(ref.page_no, r.pixels, r.size)
        for ref, r in zip(refs, rendered, strict=True)
    ]
    return images, flags
