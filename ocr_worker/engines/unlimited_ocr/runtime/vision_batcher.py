"""Several page groups' pages through the vision tower in one call.

The tower runs one call at a time on a card: each call holds its own activations (SAM's global
attention over a group's pages takes gigabytes), and calls side by side would only queue on the
card. A call is mostly launches, not arithmetic: on the H200 the tower took 10.6-13 ms a page at
a batch of 8 and 6.3 at 32, and inside the service, one 8-page group at a time, 36-45 ms a page,
which bounded the whole engine at ~25 pages/s (bench/RESULTS.md). So the groups that wait while
the tower runs go through it together in the next call: the first waiting thread to get the turn
takes every waiting group's pages (up to ``max_pages``) and hands each group its own features.
No thread of its own and no timer: a group that finds the tower idle goes at once, alone.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TypeVar

import structlog
import torch

from ocr_worker.stage_clock import clock

log = structlog.get_logger(__name__)

T = TypeVar("T")


@dataclass(eq=False)
class _Ask:
    pixels: torch.Tensor  # (pages, 3, size, size), prepared on the tower's stream
    done: threading.Event = field(default_factory=threading.Event)
    features: torch.Tensor | None = None
    error: BaseException | None = None
    served_in: float = 0.0  # seconds the call that served it held the tower


class VisionBatcher:
    """``encode(pixels) -> features`` for a batch of pages, one feature row per page, each page's
    independent of the others in its batch; run one call at a time on ``stream`` (the caller's
    stream when None), whose work is done when a call's features are handed out."""

    def __init__(
        self,
        encode: Callable[[torch.Tensor], torch.Tensor],
        max_pages: int,
        stream: torch.cuda.Stream | None = None,
    ) -> None:
        self._encode = encode
        self.max_pages = max_pages
        self.stream = stream
        # The tower's turn: a thread takes it to run a call; a waiting thread wakes when a call
        # ends, to find its pages served or to take the next turn.
        self._turn = threading.Condition()
        self._busy = False
        self._waiting: deque[_Ask] = deque()

    def features(self, pixels: torch.Tensor) -> torch.Tensor:
        """This group's pages' features, computed with whichever groups wait beside it."""
        ask = _Ask(pixels)
        asked = time.perf_counter()
        with self._turn:
            self._waiting.append(ask)
        while not ask.done.is_set():
            took, batch = False, []
            try:
                with self._turn:
                    while self._busy and not ask.done.is_set():
                        self._turn.wait()
                    if ask.done.is_set():  # served by the call it waited behind
                        break
                    self._busy = took = True
                    batch = self._take()  # never empty: this thread's own ask still waits
                self._run(batch)
            finally:
                if took:
                    self._end_turn(batch)
        clock.add("vision_wait", time.perf_counter() - asked - ask.served_in)
        if ask.error is not None:
            raise ask.error
        assert ask.features is not None
        return ask.features

    def alone(self, call: Callable[[], T]) -> T:
        """``call`` on the tower in a turn of its own (a one-page document's tiles)."""
        asked = time.perf_counter()
        with self._turn:
            while self._busy:
                self._turn.wait()
            self._busy = True
        try:
            clock.add("vision_wait", time.perf_counter() - asked)
            with clock.timed("vision"), self.on_stream():
                result = call()
                self.settle()
        finally:
            self._end_turn([])
        return result

    def settle(self) -> None:
        """Wait for the work this thread has queued on the tower's stream (not for the work
        other threads queue after it): its tensors are then ready for any stream to read."""
        if self.stream is not None:
            done = torch.cuda.Event()
            done.record(self.stream)
            done.synchronize()

    def _end_turn(self, batch: list[_Ask]) -> None:
        with self._turn:
            for ask in batch:  # never left waiting, whatever ended the call (even a BaseException)
                if not ask.done.is_set():
                    ask.error = ask.error or RuntimeError("the vision call ended without features")
                    ask.done.set()
            self._busy = False
            self._turn.notify_all()

    @contextmanager
    def on_stream(self) -> Iterator[None]:
        """This thread's torch work goes to the tower's stream, where its pixels must be."""
        with torch.cuda.stream(self.stream) if self.stream is not None else nullcontext():
            yield

    def _take(self) -> list[_Ask]:
        """The waiting groups in order of arrival, as many as fit in ``max_pages`` (at least
        one, however many pages it has). Called holding the turn's lock."""
        batch: list[_Ask] = []
        pages = 0
        while self._waiting and (
            not batch or pages + len(self._waiting[0].pixels) <= self.max_pages
        ):
            batch.append(self._waiting.popleft())
            pages += len(batch[-1].pixels)
        return batch

    def _run(self, batch: list[_Ask]) -> None:
        started = time.perf_counter()
        try:
            with self.on_stream():
                pixels = (
                    batch[0].pixels if len(batch) == 1 else torch.cat([a.pixels for a in batch])
                )
                features = self._encode(pixels)
                self.settle()
            offset = 0
            for ask in batch:
                ask.features = features[offset : offset + len(ask.pixels)]
                offset += len(ask.pixels)
        except Exception as error:
            if len(batch) > 1:  # one group's fault (or a batch too big) fails no other group
                log.warning("vision.batch_failed", groups=len(batch), error=str(error)[:300])
                clock.add("vision", time.perf_counter() - started)
                for ask in batch:
                    self._run([ask])
                return
            batch[0].error = error
        spent = time.perf_counter() - started
        clock.add("vision", spent)
        for ask in batch:
            ask.served_in = spent
            ask.done.set()
