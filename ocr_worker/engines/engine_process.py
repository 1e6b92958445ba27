"""An engine in a process of its own, so its decode loop never waits for the worker's GIL.

In a GPU worker every torch call made from Python lets go of the GIL and must take it back,
and a decode step makes dozens: while the worker's task threads run Python (S3, SQL, results),
each call waits behind them (bench/service/gil_bench.py --torch-ops; the service ran at a
third of the bare engine on the H200, bench/RESULTS.md). Here the worker's process keeps
Celery, leases, rendering and storage; a child process started with ``spawn`` (a CUDA context
of its own) holds the model, the vision tower and the decode loop, and runs each page group on
a thread of its own. Groups go over a pipe (pages as arrays, results back); the child's stage
times and token counts come back with each answer, so the worker's metrics and logs still see
them.

If the child dies, every call waiting on it fails with ``EngineProcessDied`` (the tasks fail,
their leases lapse and the groups run again), and the next call starts a new child.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

import structlog

from ocr_worker.engines.base import OcrEngine, PageGroupInput
from ocr_worker.heap import return_freed_buffers
from ocr_worker.stage_clock import clock
from uocr_core.contracts import PageResult
from uocr_core.settings import Settings

log = structlog.get_logger(__name__)


PROCESS_NAME = "uocr-engine"
PR_SET_NAME = 15  # prctl(2)
# The model loads before the child answers: ~80 s for v1 on the H200, seconds on the CPU.
START_TIMEOUT_SECONDS = 900


class EngineProcessDied(RuntimeError):
    pass


class EngineProcess(OcrEngine):
    """The engine ``build(settings)`` makes, run in a child process, up to ``max_concurrency``
    groups at once. ``build`` goes to the child by name: a module-level function.

    A child that dies (a CUDA fault, the kernel's OOM killer) fails the groups it held, whose
    leases pass them on, and the next call starts a new one, as the worker started the first: a
    worker that kept a dead engine would fail every group it took until their pages gave up.
    If a new child cannot start (the card is gone, or it is not ready within
    ``START_TIMEOUT_SECONDS``), ``when_lost`` runs: a Celery worker stops then (``stop_worker``:
    a warm shutdown) so that its supervisor sees it and starts a fresh one."""

    def __init__(
        self,
        settings: Settings,
        build: Callable[[Settings], OcrEngine],
        when_lost: Callable[[], None] | None = None,
    ) -> None:
        self._settings, self._build = settings, build
        self._when_lost = when_lost or (lambda: None)
        self._restart_lock = threading.Lock()
        self.restarts = 0
        self._child = _Child(settings, build, self._count)  # the model loads before any task
        self.name, self.uses_context_pages, self._input_sides = self._child.described

    def input_long_side(self, pages: int) -> int | None:
        if pages in self._input_sides:  # asked for every group's render: no round trip
            return self._input_sides[pages]  # type: ignore[no-any-return]
        return self._call("input_long_side", pages)  # type: ignore[no-any-return]

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        return self._call("run_group", group)  # type: ignore[no-any-return]

    def end_document(self, job_id: str) -> None:
        self._call("end_document", job_id)

    def close(self) -> None:
        self._child.close()

    def _count(self, tokens: int) -> None:
        self.count_tokens(tokens)  # looked up per call: the worker sets it after start-up

    def _call(self, method: str, *args: Any) -> Any:
        child = self._child
        if child.died is not None:
            child = self._restarted(child)
        return child.call(method, args)

    def _restarted(self, dead: _Child) -> _Child:
        """A new child in place of ``dead``; threads that find it dead together start one."""
        with self._restart_lock:
            if self._child is dead:
                log.warning("engine_process.restarting", reason=dead.died)
                dead.close()
                try:
                    self._child = _Child(self._settings, self._build, self._count)
                except Exception as error:
                    log.error("engine_process.restart_failed", error=str(error))
                    self._when_lost()
                    raise EngineProcessDied(f"{dead.died}; a new one failed: {error}") from error
                self.restarts += 1
                log.info("engine_process.restarted", restarts=self.restarts)
            return self._child


class _Child:
    """One engine child: its pipe, and the thread that reads its answers."""

    def __init__(
        self,
        settings: Settings,
        build: Callable[[Settings], OcrEngine],
        count_tokens: Callable[[int], None],
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child_end, settings, build), name=PROCESS_NAME, daemon=True
        )
        self.process.start()
        child_end.close()
        if not self._connection.poll(START_TIMEOUT_SECONDS):  # a child wedged on a faulted card
            self.process.kill()
            self.process.join(5)
            raise RuntimeError(f"the engine process was not ready in {START_TIMEOUT_SECONDS} s")
        try:
            kind, value = self._connection.recv()
        except EOFError:  # it died loading
            self.process.join(5)
            kind, value = "failed", f"exit code {self.process.exitcode}"
        if kind != "ready":
            self.process.join(5)
            raise RuntimeError(f"the engine process failed to start: {value}")
        self.described: tuple[str, bool, dict[int, int | None]] = value
        self._count_tokens = count_tokens
        self._calls = itertools.count()
        self._waiting: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()  # the waiting table, which the reader thread shares
        self._send_lock = threading.Lock()  # one sender at a time: a group pickles for ms
        self.died: str | None = None
        # The one thread that reads answers, sees the child's end and reaps it (two threads
        # waiting on one child race: the loser reads no exit code).
        self._reader = threading.Thread(
            target=self._read, name="engine-process-reader", daemon=True
        )
        self._reader.start()

    def close(self) -> None:
        with self._send_lock, contextlib.suppress(OSError, ValueError):  # unless already gone
            self._connection.send(None)  # the child answers what it holds, then ends
        self._reader.join(30)  # it reads the pipe's end as the child exits, and reaps it
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self._connection.close()

    def call(self, method: str, args: tuple[Any, ...]) -> Any:
        future: Future[Any] = Future()
        with self._lock:
            if self.died is not None:
                raise EngineProcessDied(self.died)
            call = next(self._calls)
            self._waiting[call] = future
        try:
            with self._send_lock:  # not under _lock: answers go out while a group pickles
                self._connection.send((call, method, args))
        except (OSError, ValueError) as error:  # the child is gone, or close() closed the pipe
            with self._lock:
                self._waiting.pop(call, None)
            self._reader.join(5)  # the pipe is broken: it sees the end and names the exit code
            raise EngineProcessDied(self.died or f"the engine process is gone: {error}") from error
        return future.result()

    def _read(self) -> None:
        while True:
            try:
                call, ok, value, spent, tokens = self._connection.recv()
            except (EOFError, OSError):
                self._fail_all()
                return
            for stage, amount in spent.items():  # the child's stage times, here
                clock.add(stage, amount)
            if tokens:
                self._count_tokens(tokens)
            with self._lock:
                future = self._waiting.pop(call)
            future.set_result(value) if ok else future.set_exception(value)

    def _fail_all(self) -> None:
        self.process.join(1)
        reason = f"the engine process ended (exit code {self.process.exitcode})"
        with self._lock:
            self.died = reason
            waiting, self._waiting = self._waiting, {}
        if waiting:
            log.error("engine_process.died", reason=reason, calls_failed=len(waiting))
        for future in waiting.values():
            future.set_exception(EngineProcessDied(reason))


def stop_worker() -> None:
    """Celery's warm shutdown: the tasks in hand end (their groups fail over), then the worker
    exits and its supervisor (Kubernetes, systemd, ``uocr worker``'s parent) decides."""
    log.error("worker.stopping", reason="its engine process cannot be started again")
    os.kill(os.getpid(), signal.SIGTERM)


# -- in the child ------------------------------------------------------------------------------


def _serve(
    connection: Connection, settings: Settings, build: Callable[[Settings], OcrEngine]
) -> None:
    from uocr_core.logging import configure_logging

    configure_logging(settings.log_level)
    _name_this_process(PROCESS_NAME)
    return_freed_buffers()  # every group's pages arrive as one pickle of ~20 MB
    try:
        engine = build(settings)
        group = settings.page_group_size + settings.page_group_overlap
        sides = {n: engine.input_long_side(n) for n in range(1, group + 1)}
    except Exception as error:
        connection.send(("failed", f"{type(error).__name__}: {error}"))
        return
    connection.send(("ready", (engine.name, engine.uses_context_pages, sides)))
    sending = threading.Lock()
    reported: dict[str, float] = {}
    tokens = [0]  # counted by the engine since the last answer

    def count(amount: int) -> None:
        with sending:
            tokens[0] += amount

    engine.count_tokens = count

    def answer(call: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            value, ok = getattr(engine, method)(*args), True
        except Exception as error:  # the worker's task sees it, as it would in one process
            value, ok = _picklable(error), False
        with sending:  # the stage times and tokens since the last answer go with this one
            totals = clock.totals()
            spent = {k: v - reported.get(k, 0.0) for k, v in totals.items()}
            reported.update(totals)
            connection.send((call, ok, value, spent, tokens[0]))
            tokens[0] = 0

    # Every group a worker's threads hand over runs at once here, as it would in one process.
    threads = settings.gpu_worker_threads + 1  # every task thread's group, and end_document
    with ThreadPoolExecutor(threads, thread_name_prefix="engine-group") as pool:
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError):  # the worker died: nothing to serve
                break
            if message is None:  # the worker closed the engine
                break
            pool.submit(answer, *message)
    # Every answer is sent. End here: the interpreter's own shutdown would wait on the decode
    # loop's and torch's threads mid-work (once seen taking over 10 s under tests).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _name_this_process(name: str) -> None:
    """The name ``ps``, ``top`` and ``nvidia-smi`` show (Linux): the engine, not "python"."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _picklable(error: Exception) -> Exception:
    """``error`` if it survives the pipe both ways (an exception whose ``__init__`` takes other
    arguments pickles but fails to load, which would end the worker's reader thread)."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error
