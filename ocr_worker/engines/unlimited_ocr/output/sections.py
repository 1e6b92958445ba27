"""The model's output, split into one section per page and read into page results.

Framed output (several pages) is ``<PAGE>`` page 1 ``<PAGE>`` page 2 ...: split on the marker
as the official code does, text before the first marker dropped. Unframed output (one page on
its own) is the page. The page guard has already made the sections line up with the pages; a
page with no section (the output was cut off) fails with that reason, never takes another's.
"""

from __future__ import annotations

from ocr_worker.engines.base import EMPTY_PAGE_WARNING, PageGroupInput
from ocr_worker.engines.unlimited_ocr.output.det_parser import parse_page
from ocr_worker.engines.unlimited_ocr.output.page_guard import (
    EXTRA_SECTIONS_FLAG,
    PAGE_MARKER,
    PageGuard,
)
from uocr_core.contracts import PageResult

EMPTY_FLAG = EMPTY_PAGE_WARNING  # the model wrote nothing for this page (blank, or skipped)


def split_sections(text: str, *, framed: bool) -> list[str]:
    """Decoded output -> section i is the guard's page i."""
    return text.split(PAGE_MARKER)[1:] if framed else [text]


def page_results(
    group: PageGroupInput, text: str, guard: PageGuard, *, engine: str
) -> list[PageResult]:
    """One result per output page of ``group``; context pages' sections are skipped (the
    previous group output them)."""
    sections = split_sections(text, framed=guard.framed)
    results = []
    for index, page in enumerate(group.pages, start=len(group.context)):
        width, height = page.report_size  # boxes are 0-999 of the page: any geometry is exact
        if index >= len(sections):
            results.append(
                PageResult(
                    page=page.page_no,
                    status="failed",
                    engine=engine,
                    error=(
                        f"the model's output ended after {len(sections)} of "
                        f"{guard.num_pages} page sections; none for this page"
                    ),
                )
            )
            continue
        parsed = parse_page(sections[index], width=width, height=height)
        warnings = set(guard.flags.get(index, set()))
        if not parsed.blocks:
            warnings.add(EMPTY_FLAG)
        results.append(
            PageResult(
                page=page.page_no,
                status="succeeded",
                text=parsed.text,
                markdown=parsed.markdown,
                blocks=parsed.blocks,
                width=width,
                height=height,
                engine=engine,
                warnings=sorted(warnings),
                confidence=guard.confidence(index),
            )
        )
    return results


def kept_section_ids(
    generated: list[int], guard: PageGuard, *, pages_kept: int, marker_ids: tuple[int, ...]
) -> tuple[int, ...]:
    """What the output wrote for the last ``pages_kept`` pages (the boundary pages a next group
    reads as context), as the ids the next group is fed instead of decoding them again:
    ``marker_ids`` (the marker spelled as the tokenizer does, since the next group's output
    opens with it) then the sections as written, the markers between them included, EOS
    excluded. Empty, so the next group decodes them again, unless the output ended cleanly:
    every page's section opened and EOS closed the last one (a cut-off output, or one with a
    stray extra section, is not a section worth keeping)."""
    last = guard.num_pages - 1
    clean = (
        guard.framed
        and 0 < pages_kept <= guard.num_pages
        and guard.finished
        and bool(generated)
        and generated[-1] == guard.eos_id
        and len(guard.section_starts) == guard.num_pages
        and EXTRA_SECTIONS_FLAG not in guard.flags.get(last, set())
    )
    if not clean:
        return ()
    start = guard.section_starts[guard.num_pages - pages_kept]
    return (*marker_ids, *generated[start:-1])
