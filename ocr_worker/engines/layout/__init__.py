"""Layout of a page from its detected lines: skew, reading order, blocks, Markdown.

Pure geometry on the detector's output (no image, no framework), so its tests run in
milliseconds: ``boxes`` (the detections and their upright view), ``skew``, ``lines``,
``stripes`` (clear vertical stripes), ``order`` (columns vs across), ``furniture`` (running
heads, feet, page numbers), ``tables``, ``paragraphs`` (blocks and their labels), ``spacing``
(Chinese/Latin), ``markdown``, and ``page`` tying them together.
"""

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.boxes import TextBox
from ocr_worker.engines.layout.markdown import render
from ocr_worker.engines.layout.page import layout_page

__all__ = ["LayoutBlock", "TextBox", "layout_page", "render"]
