"""A document's next page group rendered in the render processes while this group decodes,
with real render processes and real PDF pages (each page draws its own number)."""

from __future__ import annotations

import hashlib
import time

import pytest

from ocr_api.core.contracts import PageResult
from ocr_worker.engines.base import PageGroupInput
from ocr_worker.imaging import RenderedPage
from tests.worker.conftest import ScriptedEngine


def _digest(pixels) -> str:  # type: ignore[no-untyped-def]
    return hashlib.sha256(pixels.tobytes()).hexdigest()


def _wait_for(condition, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("harness", [{"render_processes": 2}], indirect=True)
def test_the_next_group_is_drawn_while_this_one_decodes_and_each_page_gets_its_own_image(
    harness,  # type: ignore[no-untyped-def]
) -> None:
    job_id = harness.submit(7)  # groups [1 2 3], [3 | 4 5], [5 | 6 7]
    pipeline = harness.pipeline(ScriptedEngine())
    ahead = pipeline.next_group_pages
    assert ahead is not None
    seen: dict[int, str] = {}
    drawn_while_decoding: list[int] = []

    class RecordingEngine(ScriptedEngine):
        def run_group(self, group: PageGroupInput) -> list[PageResult]:
            for page in [*group.context, *group.pages]:
                seen.setdefault(page.page_no, _digest(page.pixels))
                assert seen[page.page_no] == _digest(page.pixels)
            if group.pages[-1].page_no < 7:  # the next group: its 3 pages drawn during this one
                _wait_for(lambda: ahead.drawn(job_id) == 3)
                drawn_while_decoding.append(ahead.drawn(job_id))
            return super().run_group(group)

    pipeline.engine = RecordingEngine()
    while harness.dispatcher.groups:
        pipeline.run(*harness.dispatcher.groups.popleft())

    assert drawn_while_decoding == [3, 3]
    assert harness.job(job_id).status == "succeeded"
    assert ahead.held() == 0  # every group took its pages: nothing left holding pixels
    # Every page's image is the one drawn for that page alone, not a neighbour's.
    pool = pipeline.render_pool
    assert pool is not None
    with harness.sessions() as session:
        from ocr_api.core.models import Page

        pages = session.query(Page).filter_by(job_id=job_id).order_by(Page.position).all()
        refs = [(p.source_key, p.source_index) for p in pages]
    alone = pool.render_many(refs)
    assert all(isinstance(r, RenderedPage) for r in alone)
    assert seen == {n + 1: _digest(r.pixels) for n, r in enumerate(alone)}  # type: ignore[union-attr]
    assert len(set(seen.values())) == 7


@pytest.mark.parametrize("harness", [{"render_processes": 2}], indirect=True)
def test_pages_begun_for_too_many_documents_are_dropped_oldest_first(harness) -> None:  # type: ignore[no-untyped-def]
    from ocr_worker.next_group_pages import NextGroupPages

    first, second = harness.submit(2), harness.submit(2)
    pipeline = harness.pipeline(ScriptedEngine())
    assert pipeline.render_pool is not None
    with harness.sessions() as session:
        from ocr_api.core.models import Page

        keys = {
            job: [(p.source_key, p.source_index) for p in session.query(Page).filter_by(job_id=job)]
            for job in (first, second)
        }
    ahead = NextGroupPages(pipeline.render_pool, max_documents=1)
    ahead.start(first, keys[first], None)
    ahead.start(second, keys[second], None)
    assert ahead.held() == 1  # the first document's pages were let go
    assert _wait_for(lambda: ahead.drawn(second) == 2)
    # The first document's group renders its pages afresh; the second takes its own.
    for job in (first, second):
        drawn = ahead.render(job, keys[job], None)
        assert [isinstance(r, RenderedPage) for r in drawn] == [True, True]
    assert ahead.held() == 0
