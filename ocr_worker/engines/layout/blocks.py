"""What the layout hands on: a labelled block of lines, in reading order."""

from __future__ import annotations

from dataclasses import dataclass, field

from ocr_worker.engines.layout.boxes import Rect, union_bounds
from ocr_worker.engines.layout.lines import Line

# Labels beyond the GPU engine's "text" and "title": page furniture kept apart from the body,
# and the structures Markdown renders differently.
LABELS = ("text", "title", "list", "code", "table", "header", "footer", "page_number")


@dataclass
class LayoutBlock:
    label: str
    lines: list[Line]
    level: int = 0  # a title's heading level, 1 = largest
    rows: list[list[str]] = field(default_factory=list)  # a table's cells, row by row

    @property
    def text(self) -> str:
        """Line by line as read; a table row's cells separated by tabs."""
        if self.rows:
            return "\n".join("\t".join(cell for cell in row) for row in self.rows)
        return "\n".join(line.text for line in self.lines)

    @property
    def page_bounds(self) -> Rect:
        return union_bounds([b.box for line in self.lines for b in line.boxes])

    @property
    def confidence(self) -> float:
        return min(b.box.score for line in self.lines for b in line.boxes)
