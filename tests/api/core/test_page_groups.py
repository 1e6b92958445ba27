from __future__ import annotations

import pytest

from uocr_core.page_groups import PageGroupPlanner


def test_overlapping_groups_output_every_page_exactly_once() -> None:
    for pages in range(1, 40):
        for size in range(1, 6):
            for overlap in range(size):
                groups = PageGroupPlanner(size=size, overlap=overlap).plan(pages)
                output = [p for g in groups for p in g.output_positions]
                assert output == list(range(pages)), (pages, size, overlap)
                assert all(g.last_position - g.first_position < size for g in groups)


def test_later_groups_start_with_the_previous_groups_last_pages() -> None:
    groups = PageGroupPlanner(size=4, overlap=1).plan(10)
    spans = [(g.first_position, g.last_position, g.overlap) for g in groups]
    assert spans == [(0, 3, 0), (3, 6, 1), (6, 9, 1)]


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError):
        PageGroupPlanner(size=2, overlap=2)
    with pytest.raises(ValueError):
        PageGroupPlanner(size=2, overlap=0).plan(0)
