"""Layout of a page from its detected lines: skew, reading order, blocks, Markdown.

Pure geometry on the detector's output (no image, no framework), so its tests run in
milliseconds. ``page.layout_page`` ties it together: ``boxes`` (the detections and their upright
view), ``skew``, ``lines``, ``stripes`` (clear vertical stripes), ``order`` (columns or across),
``furniture`` (running heads, feet, page numbers), ``tables``, ``paragraphs`` with ``headings``
and ``code`` (blocks and their labels), ``spacing`` (Chinese/Latin) and ``markdown``.
"""

from ocr_worker.engines.layout.blocks import LayoutBlock
from ocr_worker.engines.layout.boxes import TextBox
from ocr_worker.engines.layout.markdown import render
from ocr_worker.engines.layout.page import layout_page

__all__ = ["LayoutBlock", "TextBox", "layout_page", "render"]
