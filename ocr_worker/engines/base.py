"""The one interface every OCR engine implements, CPU or GPU.

The pipeline hands an engine one page group at a time; the engine returns one ``PageResult`` per
output page, in order. Engines that keep state across groups of a document (the GPU engine reuses
the KV of boundary pages) drop it in ``end_document``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uocr_core.contracts import PageResult

# A page read with no text at all (a blank sheet, or one the engine skipped): flagged, so the
# job does not read as a clean success when a page that should hold text came back empty.
EMPTY_PAGE_WARNING = "empty_page"


@dataclass(frozen=True)
class PageImage:
    page_no: int
    pixels: np.ndarray  # (H, W, 3) uint8 RGB
    # (width, height) the page's boxes are reported in: its size at the service's render dpi,
    # where the pixels were drawn smaller for the engine (OcrEngine.input_long_side).
    size: tuple[int, int] | None = None

    @property
    def report_size(self) -> tuple[int, int]:
        """(width, height) of the geometry the results use."""
        height, width = self.pixels.shape[:2]
        return self.size or (width, height)


@dataclass(frozen=True)
class PageGroupInput:
    job_id: str
    group_index: int
    context: list[PageImage]  # boundary pages already output by the previous group
    pages: list[PageImage]  # pages to output, in document order
    is_last: bool
    # An interactive job's group: an engine that queues groups takes it ahead of the backlog.
    interactive: bool = False


class OcrEngine(ABC):
    name: str
    # Whether the engine reads the context pages; the pipeline skips rendering them otherwise.
    uses_context_pages: bool = False
    # Told how many tokens each decoded group generated (the worker's tokens/s); engines that
    # generate no tokens (the CPU engine) never call it.
    count_tokens: Callable[[int], None] = staticmethod(lambda _count: None)

    def input_long_side(self, pages: int) -> int | None:
        """The longest side, in pixels, this engine reads of a page in a group of ``pages``:
        the pipeline draws PDF pages no larger. None (the default): at the render dpi."""
        return None

    @abstractmethod
    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        """One result per page of ``group.pages``, same order. A bad page fails alone."""

    def end_document(self, job_id: str) -> None:  # noqa: B027 - optional hook
        """Forget any state kept for ``job_id`` (default: none kept)."""
