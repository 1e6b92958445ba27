"""One thread per GPU drives the scheduler; page-group tasks hand it requests and wait.

Celery runs GPU workers with a thread pool, so up to ``max_concurrency`` page groups (of any
documents) are in flight at once and share each decode step. Only this thread touches the
scheduler, the workspace and the KV pool.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import structlog

from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, Finished, Scheduler
from ocr_worker.stage_clock import clock

log = structlog.get_logger(__name__)


class DecodeLoop:
    def __init__(
        self,
        scheduler: Scheduler,
        on_thread: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        """``on_thread``: entered by the loop thread for its whole life (the engine's
        high-priority CUDA stream, so the tower's calls do not delay the steps)."""
        self.scheduler = scheduler
        self._on_thread = on_thread
        self._inbox: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._pending: dict[str, Future[Finished]] = {}
        self._thread = threading.Thread(target=self._run, name="decode-loop", daemon=True)
        self._thread.start()

    def decode(self, request: DecodeRequest) -> Finished:
        future: Future[Finished] = Future()

        def enqueue() -> None:
            self.scheduler.submit(request)
            self._pending[request.seq_id] = future

        accepted: Future[None] = Future()
        self._inbox.put((enqueue, accepted))
        accepted.result()  # a request that can never run is refused now, not left waiting
        return future.result()

    def call(self, action: Callable[[], Any]) -> Any:
        """Run ``action`` on the loop thread (e.g. freeing a document's kept blocks)."""
        done: Future[Any] = Future()
        self._inbox.put((action, done))
        return done.result()

    def _run(self) -> None:
        with self._on_thread():
            self._serve()

    def _serve(self) -> None:
        stalled = True
        while True:
            # With nothing running and nothing just finished, only an action from the inbox (a
            # new request, blocks given back) can change anything: wait for one rather than spin
            # on a request that does not fit yet.
            if stalled:  # the GPU has nothing to do until a request or blocks come
                with clock.timed("idle"):
                    self._drain(block=True)
            else:
                self._drain(block=False)
            try:
                finished = self.scheduler.step()
            except Exception as error:  # fail every waiter rather than hang them
                log.exception("decode_loop.failed")
                self._fail_all(error)
                stalled = True
                continue
            for item in finished:
                self._pending.pop(item.sequence.seq_id).set_result(item)
            stalled = not self.scheduler.running and not finished

    def _drain(self, *, block: bool) -> None:
        while True:
            try:
                action, done = self._inbox.get(block=block)
            except queue.Empty:
                return
            block = False
            try:
                done.set_result(action())
            except Exception as error:
                done.set_exception(error)

    def _fail_all(self, error: Exception) -> None:
        for seq_id, future in list(self._pending.items()):
            future.set_exception(error)
            self._pending.pop(seq_id)
        self.scheduler.abort_all()
