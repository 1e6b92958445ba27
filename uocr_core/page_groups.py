"""The plan of overlapping page groups a document is decoded in (pure arithmetic, no torch).

A group decodes ``size`` consecutive pages; its first ``overlap`` pages were the previous group's
last pages and serve only as context (their KV is reused), so every page is output exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedGroup:
    group_index: int
    first_position: int  # 0-based position of the first page in the group, context included
    last_position: int  # inclusive
    overlap: int  # leading context pages, already output by the previous group

    @property
    def output_positions(self) -> range:
        return range(self.first_position + self.overlap, self.last_position + 1)


class PageGroupPlanner:
    def __init__(self, *, size: int, overlap: int) -> None:
        if size < 1 or not 0 <= overlap < size:
            raise ValueError(f"need size >= 1 and 0 <= overlap < size, got {size=} {overlap=}")
        self.size = size
        self.overlap = overlap

    def plan(self, page_count: int) -> list[PlannedGroup]:
        if page_count < 1:
            raise ValueError("a document needs at least one page")
        groups: list[PlannedGroup] = []
        next_output = 0
        while next_output < page_count:
            context = min(self.overlap, next_output)
            first = next_output - context
            last = min(first + self.size, page_count) - 1
            groups.append(PlannedGroup(len(groups), first, last, context))
            next_output = last + 1
        return groups
