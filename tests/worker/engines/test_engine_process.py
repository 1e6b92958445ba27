"""The GPU engine class in a child process of its own (engine_process.py), on the tiny checkpoint
on the CPU: the same pages as in the worker's process, its stage times and tokens reported here,
a child that dies fails the waiting task at once instead of leaving it hanging, and the next
group gets a new child."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.engine_process import EngineProcess, EngineProcessDied
from ocr_worker.engines.factory import make_engine, unlimited_ocr_engine
from ocr_worker.engines.unlimited_ocr.model.manifest import write_manifest
from ocr_worker.stage_clock import clock
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint
from uocr_core.settings import Settings, load_settings


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-engine-process"))
    write_manifest(path)
    return load_settings(
        engine="unlimited_ocr",
        model_path=path,
        page_group_size=3,
        page_group_overlap=1,
        visual_cache_workspace_gb=0.001,
        max_concurrency=4,
        unlimited_ocr={"max_tokens_per_page": 6, "block_size": 4, "engine_process": True},
    )


def _page(n: int) -> PageImage:
    rng = np.random.default_rng(n)
    return PageImage(n, rng.integers(0, 255, (200 + 10 * n, 150, 3), dtype=np.uint8))


DOCUMENT = [  # two groups: the second reads page 3 again as its context
    PageGroupInput("doc", 0, [], [_page(1), _page(2), _page(3)], False),
    PageGroupInput("doc", 1, [_page(3)], [_page(4), _page(5)], True),
]


def test_the_engine_process_reads_what_the_engine_reads_here(settings: Settings) -> None:
    here = unlimited_ocr_engine(settings)
    expected = [here.run_group(group) for group in DOCUMENT]
    remote = make_engine(settings)
    assert isinstance(remote, EngineProcess)
    counted: list[int] = []
    remote.count_tokens = counted.append
    before = clock.totals()
    try:
        assert remote.name == "unlimited_ocr" and remote.uses_context_pages
        assert remote.input_long_side(3) == here.input_long_side(3)
        for group, pages in zip(DOCUMENT, expected, strict=True):
            got = remote.run_group(group)
            assert [_timeless(r) for r in got] == [_timeless(r) for r in pages]
        remote.end_document("doc")
        # The child's decode loop and tokens show in this process's clock and metrics.
        after = clock.totals()
        assert after.get("decode", 0) > before.get("decode", 0)
        assert after.get("prefill", 0) > before.get("prefill", 0)
        assert sum(counted) > 0
        with pytest.raises(ValueError, match="more blocks than the whole workspace"):  # here
            remote.run_group(PageGroupInput("big", 0, [], [_page(n) for n in range(120)], True))
        assert len(remote.run_group(DOCUMENT[0])) == 3  # and it goes on serving
    finally:
        remote.close()
    assert remote._child.process.exitcode == 0  # closed, it ended by itself: not killed after 10 s


class _TwoArguments(Exception):
    def __init__(self, page: int, reason: str) -> None:
        super().__init__(f"page {page}: {reason}")


def test_an_error_that_would_not_load_in_the_worker_comes_back_as_its_message() -> None:
    """An exception whose __init__ takes other arguments pickles but fails to load: sent as it
    is, it would end the worker's reader thread and hang every later call."""
    from ocr_worker.engines.engine_process import _picklable

    sent = _picklable(_TwoArguments(3, "no text layer"))
    assert type(sent) is RuntimeError
    assert str(sent) == "_TwoArguments: page 3: no text layer"
    error = ValueError("a plain one")
    assert _picklable(error) is error


def _killed_while_reading(remote: EngineProcess) -> BaseException | None:
    """SIGKILL the child while a group waits on it; what the waiting task sees."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            remote.run_group(DOCUMENT[0])
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - what the task would see
            outcome.append(error)

    waiting = threading.Thread(target=run, daemon=True)
    waiting.start()
    time.sleep(0.05)
    pid = remote._child.process.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    waiting.join(30)  # a hang here is the bug
    assert not waiting.is_alive()
    return outcome[0]


def test_a_dead_engine_process_fails_the_waiting_group_and_the_next_group_gets_a_new_one(
    settings: Settings,
) -> None:
    expected = [_timeless(r) for r in unlimited_ocr_engine(settings).run_group(DOCUMENT[0])]
    lost: list[bool] = []
    remote = EngineProcess(settings, unlimited_ocr_engine, when_lost=lambda: lost.append(True))
    try:
        first = remote._child.process.pid
        failed = _killed_while_reading(remote)
        assert isinstance(failed, EngineProcessDied)  # the group takes seconds on the CPU
        assert "exit code -9" in str(failed)
        assert [_timeless(r) for r in remote.run_group(DOCUMENT[0])] == expected
        assert remote.restarts == 1 and remote._child.process.pid != first and not lost
    finally:
        remote.close()


def test_an_engine_that_cannot_start_again_stops_the_worker(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The model's files gone (a volume unmounted): no new child can load them, so the worker
    is told to stop rather than fail every group it takes."""
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("vanishing"))
    write_manifest(path)
    lost: list[bool] = []
    here = settings.model_copy(update={"model_path": path})
    remote = EngineProcess(here, unlimited_ocr_engine, when_lost=lambda: lost.append(True))
    try:
        assert isinstance(_killed_while_reading(remote), EngineProcessDied)
        shutil.rmtree(path)
        with pytest.raises(EngineProcessDied, match="a new one failed"):
            remote.run_group(DOCUMENT[0])
        assert lost == [True]
    finally:
        remote.close()


def _timeless(result):  # type: ignore[no-untyped-def]
    return result.model_copy(update={"duration_ms": 0})
