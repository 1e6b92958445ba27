"""Page groups that wait for the vision tower go through it together (vision_batcher.py):
each group gets its own pages' features, a call holds at most ``max_pages`` pages, one group's
fault fails no other, and a served group does not wait behind the next call. Then the real
tower (the tiny checkpoint's SAM and CLIP, through the engine): groups run at once read every
page as they read it alone."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from ocr_worker.engines.base import PageGroupInput
from ocr_worker.engines.unlimited_ocr.runtime.vision_batcher import VisionBatcher
from tests.worker.engines.unlimited_ocr.test_engine import _engine, _page, _timeless, checkpoint

__all__ = ["checkpoint"]  # the tiny checkpoint fixture, shared with test_engine


class Tower:
    """An encode that records each call's page count, holds each call until the test lets it
    go, and refuses a page of NaNs as a real tower's checks would refuse a bad input."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.started = threading.Semaphore(0)
        self.go = threading.Semaphore(0)

    def __call__(self, pixels: torch.Tensor) -> torch.Tensor:
        self.calls.append(len(pixels))
        self.started.release()
        assert self.go.acquire(timeout=10), "the test never let the call go"
        if torch.isnan(pixels).any():
            raise ValueError("a page of NaNs")
        return pixels.flatten(1).sum(1, keepdim=True) * 2  # one row per page, from its own pixels


def _group(first: float, pages: int) -> torch.Tensor:
    return (
        torch.arange(first, first + pages, dtype=torch.float32)
        .reshape(pages, 1, 1, 1)
        .expand(pages, 3, 2, 2)
    )


def _expected(pixels: torch.Tensor) -> torch.Tensor:
    return pixels.flatten(1).sum(1, keepdim=True) * 2


def _start(pool: ThreadPoolExecutor, batcher: VisionBatcher, pixels: torch.Tensor) -> Future:  # type: ignore[type-arg]
    return pool.submit(batcher.features, pixels)


def _wait_queued(batcher: VisionBatcher, count: int) -> None:
    for _ in range(1000):
        with batcher._turn:
            if len(batcher._waiting) == count:
                return
        threading.Event().wait(0.005)
    raise AssertionError(f"{count} groups never queued")


def test_groups_waiting_while_the_tower_runs_go_through_it_together() -> None:
    tower = Tower()
    batcher = VisionBatcher(tower, max_pages=32)
    groups = [_group(10 * n, 8) for n in range(4)]
    with ThreadPoolExecutor(4) as pool:
        first = _start(pool, batcher, groups[0])
        assert tower.started.acquire(timeout=10)  # the first group found the tower idle
        rest = [_start(pool, batcher, g) for g in groups[1:]]
        _wait_queued(batcher, 3)
        tower.go.release(2)
        results = [first.result(10)] + [f.result(10) for f in rest]
    assert tower.calls == [8, 24]  # three groups' pages in the second call
    for pixels, features in zip(groups, results, strict=True):
        assert torch.equal(features, _expected(pixels))  # each its own pages, in order


def test_a_call_holds_at_most_max_pages_and_every_group_is_served_in_order() -> None:
    tower = Tower()
    batcher = VisionBatcher(tower, max_pages=16)
    groups = [_group(10 * n, 8) for n in range(4)] + [_group(100, 20)]
    with ThreadPoolExecutor(5) as pool:
        first = _start(pool, batcher, groups[0])
        assert tower.started.acquire(timeout=10)
        rest = [_start(pool, batcher, g) for g in groups[1:3]]
        _wait_queued(batcher, 2)
        rest += [_start(pool, batcher, groups[3])]
        _wait_queued(batcher, 3)
        rest += [_start(pool, batcher, groups[4])]  # larger than a call: it goes alone
        _wait_queued(batcher, 4)
        tower.go.release(4)
        results = [first.result(10)] + [f.result(10) for f in rest]
    assert tower.calls == [8, 16, 8, 20]
    for pixels, features in zip(groups, results, strict=True):
        assert torch.equal(features, _expected(pixels))


def test_one_groups_bad_pages_fail_that_group_alone() -> None:
    tower = Tower()
    batcher = VisionBatcher(tower, max_pages=32)
    bad = _group(0, 8).clone()
    bad[3] = float("nan")
    groups = [_group(10, 8), _group(20, 8), bad, _group(30, 8)]
    with ThreadPoolExecutor(4) as pool:
        first = _start(pool, batcher, groups[0])
        assert tower.started.acquire(timeout=10)
        rest = [_start(pool, batcher, g) for g in groups[1:]]
        _wait_queued(batcher, 3)
        tower.go.release(5)  # the first call, the three together (which fails), each alone
        assert torch.equal(first.result(10), _expected(groups[0]))
        assert torch.equal(rest[0].result(10), _expected(groups[1]))
        with pytest.raises(ValueError, match="NaNs"):
            rest[1].result(10)
        assert torch.equal(rest[2].result(10), _expected(groups[3]))
    assert tower.calls == [8, 24, 8, 8, 8]


def test_a_call_ended_by_a_base_exception_leaves_no_group_waiting_and_the_tower_free() -> None:
    """SystemExit (or KeyboardInterrupt) in a shared call: the thread that ran it sees it, the
    other group in the call gets an error instead of waiting for ever, and the next group is
    served."""

    class Exiting(Tower):
        def __call__(self, pixels: torch.Tensor) -> torch.Tensor:
            features = super().__call__(pixels)
            if len(pixels) > 8:
                raise SystemExit("the worker is shutting down")
            return features

    tower = Exiting()
    batcher = VisionBatcher(tower, max_pages=32)
    with ThreadPoolExecutor(3) as pool:
        first = _start(pool, batcher, _group(0, 8))
        assert tower.started.acquire(timeout=10)
        pair = [_start(pool, batcher, _group(10, 8)), _start(pool, batcher, _group(20, 8))]
        _wait_queued(batcher, 2)
        tower.go.release(3)
        assert torch.equal(first.result(10), _expected(_group(0, 8)))
        errors = sorted(type(f.exception(10)).__name__ for f in pair)
        assert errors == ["RuntimeError", "SystemExit"]
        assert torch.equal(batcher.features(_group(30, 8)), _expected(_group(30, 8)))
    assert tower.calls == [8, 16, 8]


def test_a_one_page_documents_tiles_take_a_turn_of_their_own() -> None:
    tower = Tower()
    batcher = VisionBatcher(tower, max_pages=32)
    order: list[str] = []

    def tiles_call() -> str:
        order.append("tiles")
        return "tile features"

    with ThreadPoolExecutor(2) as pool:
        group = _start(pool, batcher, _group(0, 8))
        assert tower.started.acquire(timeout=10)  # the tower is busy with the group
        tiles = pool.submit(batcher.alone, tiles_call)
        threading.Event().wait(0.1)
        assert order == []  # it waits for the group's call to end
        tower.go.release()
        assert torch.equal(group.result(10), _expected(_group(0, 8)))
        assert tiles.result(10) == "tile features"
    assert order == ["tiles"]


def test_a_served_group_does_not_wait_behind_the_next_call() -> None:
    tower = Tower()
    batcher = VisionBatcher(tower, max_pages=32)
    with ThreadPoolExecutor(3) as pool:
        first = _start(pool, batcher, _group(0, 8))
        assert tower.started.acquire(timeout=10)
        tower.go.release()
        assert first.result(10) is not None
        second = _start(pool, batcher, _group(10, 8))
        assert tower.started.acquire(timeout=10)
        third = _start(pool, batcher, _group(20, 8))  # queued while the second call runs
        _wait_queued(batcher, 1)
        tower.go.release()
        assert tower.started.acquire(timeout=10)  # the third group's call has begun and is held
        assert torch.equal(second.result(10), _expected(_group(10, 8)))  # back, not held by it
        tower.go.release()
        assert torch.equal(third.result(10), _expected(_group(20, 8)))


def test_groups_at_once_through_the_real_tower_read_as_each_alone(checkpoint: Path) -> None:
    """The tiny checkpoint's SAM and CLIP, in fp32 on the CPU: four documents' groups run from
    four threads (their pages through the tower in shared calls) give the results each gives
    run alone, and the tower saw fewer calls than groups."""
    documents = [
        PageGroupInput(
            f"doc{n}", 0, [], [_page(3 * n + 1), _page(3 * n + 2), _page(3 * n + 3)], True
        )
        for n in range(4)
    ]
    alone = _engine(checkpoint)
    expected = [_timeless(alone.run_group(group)) for group in documents]
    together = _engine(checkpoint)
    calls: list[int] = []
    encode = together.vision._encode
    hold = threading.Event()

    def recorded(pixels: torch.Tensor) -> torch.Tensor:
        calls.append(len(pixels))
        if len(calls) == 1:  # the first call waits until the others have queued behind it
            hold.wait(10)
        return encode(pixels)

    together.vision._encode = recorded
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(together.run_group, documents[0])]
        while not calls and not futures[0].done():  # a failed first group fails the test below
            threading.Event().wait(0.005)
        futures += [pool.submit(together.run_group, group) for group in documents[1:]]
        _wait_queued(together.vision, 3)
        hold.set()
        results = [_timeless(f.result(120)) for f in futures]
    assert calls == [3, 9]
    assert results == expected
