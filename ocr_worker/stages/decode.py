"""Decoding a claimed group: its pages rendered, the engine run over them, and each result
saying which engine and model version read it, with the render's flags first in its warnings.

A page that could not be rendered fails alone; an unreadable boundary (context) page only
costs the group its context. An engine that drops a page is a bug, raised rather than lost.
"""

from __future__ import annotations

from ocr_worker.engines.base import PageGroupInput
from ocr_worker.stages.claim import ClaimedGroup
from ocr_worker.stages.parts import StageParts
from ocr_worker.stages.render import render_group
from uocr_core.contracts import PageResult


def decode_group(job_id: str, claimed: ClaimedGroup, parts: StageParts) -> list[PageResult]:
    """One result per claimed page, in the claim's order."""
    engine, model_version = parts.engine, parts.model_version
    context = claimed.context if engine.uses_context_pages else []
    rendered = render_group(
        context,
        claimed.pages,
        long_side=engine.input_long_side(len(context) + len(claimed.pages)),
        rasterizer=parts.rasterizer,
        render_pool=parts.render_pool,
    )
    group = PageGroupInput(
        job_id,
        claimed.group_index,
        rendered.context,
        rendered.images,
        claimed.is_last,
        interactive=claimed.interactive,
    )
    decoded = engine.run_group(group) if rendered.images else []
    by_page = {r.page: r for r in decoded} | rendered.failed
    missing = [ref.page_no for ref in claimed.pages if ref.page_no not in by_page]
    if missing:  # an engine that drops a page is a bug; record it rather than lose the page
        raise RuntimeError(f"engine {engine.name} returned no result for pages {missing}")
    # Each result says which engine and model version read it; the render's flags (a repaired
    # file) go first in its warnings.
    return [
        result.model_copy(
            update={
                "engine": result.engine or engine.name,
                "model_version": model_version,
                "warnings": [*rendered.flags.get(result.page, ()), *result.warnings],
            }
        )
        for result in (by_page[ref.page_no] for ref in claimed.pages)
    ]
