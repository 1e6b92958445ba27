"""Rendering a claimed group's pages: each page's image (or why it has none), drawn no larger
than the engine reads, in CPU processes beside the task when there are some."""

from __future__ import annotations

from dataclasses import dataclass

from ocr_worker.engines.base import PageImage
from ocr_worker.imaging import PageRasterizer, ProcessRasterizer, RenderedPage, render_many
from ocr_worker.stage_clock import clock
from ocr_worker.stages.claim import PageRef
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.contracts import PageResult
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


@dataclass(frozen=True)
class RenderedGroup:
    """A claimed group's pages as the engine takes them."""

    context: list[PageImage]  # the boundary pages, or none if one of them could not be drawn
    images: list[PageImage]  # the output pages drawn, in the claim's order
    failed: dict[int, PageResult]  # the output pages not drawn, failed with the reason
    flags: RenderFlags


def render_group(
    context: list[PageRef],
    pages: list[PageRef],
    *,
    long_side: int | None,
    rasterizer: PageRasterizer,
    render_pool: ProcessRasterizer | None,
) -> RenderedGroup:
    """Each page's image, or why it has none: a page that could not be drawn fails alone; an
    unreadable boundary (context) page only costs the group its context."""
    refs = [*context, *pages]
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
    context_images = [
        PageImage(ref.page_no, r.pixels, r.size)
        for ref, r in zip(context, rendered[: len(context)], strict=True)
        if isinstance(r, RenderedPage)
    ]
    if len(context_images) < len(context):  # an unreadable boundary page: decode without it
        context_images = []
    images, failed = [], {}
    for ref, r in zip(pages, rendered[len(context) :], strict=True):
        if isinstance(r, RenderedPage):
            images.append(PageImage(ref.page_no, r.pixels, r.size))
        else:
            failed[ref.page_no] = PageResult(page=ref.page_no, status="failed", error=str(r))
    return RenderedGroup(context_images, images, failed, flags)
