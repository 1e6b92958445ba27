"""Decoding a claimed group: its pages rendered, the engine run over them, and each result
saying which engine and model version read it, with the render's flags first in its warnings.

A page that could not be rendered fails alone; an unreadable boundary (context) page only
costs the group its context. An engine that drops a page is a bug, raised rather than lost.
"""

from __future__ import annotations

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.imaging import PageRenderError
from ocr_worker.stages.claim import ClaimedGroup, PageRef
from ocr_worker.stages.parts import StageParts
from ocr_worker.stages.render import RenderFlags, render_pages
from uocr_core.contracts import PageResult


def decode_group(job_id: str, claimed: ClaimedGroup, parts: StageParts) -> list[PageResult]:
    """One result per claimed page, in the claim's order."""
    engine, model_version = parts.engine, parts.model_version
    context = claimed.context if engine.uses_context_pages else []
    refs = [*context, *claimed.pages]
    rendered, flags = render_pages(
        refs,
        long_side=engine.input_long_side(len(refs)),
        rasterizer=parts.rasterizer,
        render_pool=parts.render_pool,
    )
    context_images = [i for i in rendered[: len(context)] if isinstance(i, PageImage)]
    if len(context_images) < len(context):  # an unreadable boundary page: decode without it
        context_images = []
    images, failed = _split(claimed.pages, rendered[len(context) :])
    group = PageGroupInput(
        job_id,
        claimed.group_index,
        context_images,
        images,
        claimed.is_last,
        interactive=claimed.interactive,
    )
    decoded = engine.run_group(group) if images else []
    by_page = {r.page: r for r in decoded} | failed
    missing = [ref.page_no for ref in claimed.pages if ref.page_no not in by_page]
    if missing:  # an engine that drops a page is a bug; record it rather than lose the page
        raise RuntimeError(f"engine {engine.name} returned no result for pages {missing}")
    return [
        _provenance(_flagged(by_page[ref.page_no], flags), engine.name, model_version)
        for ref in claimed.pages
    ]


def _split(
    refs: list[PageRef], rendered: list[PageImage | PageRenderError]
) -> tuple[list[PageImage], dict[int, PageResult]]:
    """The images to decode, and the pages failed already (why they have no image)."""
    failed: dict[int, PageResult] = {}
    images = []
    for ref, item in zip(refs, rendered, strict=True):
        if isinstance(item, PageImage):
            images.append(item)
        else:
            failed[ref.page_no] = PageResult(page=ref.page_no, status="failed", error=str(item))
    return images, failed


def _provenance(result: PageResult, engine_name: str, model_version: str) -> PageResult:
    engine = result.engine or engine_name
    return result.model_copy(update={"engine": engine, "model_version": model_version})


def _flagged(result: PageResult, flags: RenderFlags) -> PageResult:
    """The render's flags (a repaired file) go first in the page's warnings."""
    if not flags.get(result.page):
        return result
    return result.model_copy(update={"warnings": [*flags[result.page], *result.warnings]})
