"""Rasterising pages: PDF pages with PyMuPDF, image files (PNG, JPEG, multi-page TIFF) as stored."""

from __future__ import annotations

import functools
import io
import itertools
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.process import AuthenticationString  # type: ignore[attr-defined]
from typing import Any, Protocol, TypeVar

import numpy as np
import pymupdf
import structlog
from PIL import Image

from uocr_core.logging import configure_logging
from uocr_core.mupdf_messages import keep_mupdf_quiet, log_mupdf_messages
from uocr_core.settings import S3Settings
from uocr_core.storage import ObjectStore, make_object_store

T = TypeVar("T")


log = structlog.get_logger(__name__)


class PageRenderError(RuntimeError):
    pass


# A page of a PDF that MuPDF had to repair (truncated, corrupt xref): rendered, but flagged.
REPAIRED_WARNING = "repaired_file"


@dataclass(frozen=True)
class RenderedPage:
    pixels: np.ndarray  # (H, W, 3) uint8 RGB
    warnings: tuple[str, ...] = ()
    # (width, height) of the page at the render dpi when the pixels were drawn smaller for an
    # engine that reads no more (its results are still reported in this geometry); else None.
    size: tuple[int, int] | None = None


keep_mupdf_quiet()


def release_mupdf_store() -> None:
    """Empty MuPDF's process-wide store of decoded resources. It keeps the images of every
    document opened, up to 256 MB per process, though no later page reuses a scan's image: a
    worker's memory crept by ~2.4 MB a page until it was full (bench/service/soak_bench.py)."""
    pymupdf.TOOLS.store_shrink(100)


class PageRasterizer:
    """Renders pages of stored inputs; keeps the last few input files in memory, not all."""

    def __init__(self, store: ObjectStore, *, dpi: int, max_side: int, cached_files: int = 2):
        self.store = store
        self.dpi = dpi
        self.max_side = max_side
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._cached_files = cached_files
        self._lock = threading.Lock()

    def render(self, source_key: str, index: int) -> np.ndarray:
        """(H, W, 3) uint8 RGB pixels of page ``index`` of the stored file ``source_key``."""
        return self.render_page(source_key, index).pixels

    def render_page(
        self, source_key: str, index: int, long_side: int | None = None
    ) -> RenderedPage:
        """The page's pixels and what the service must say about them. ``long_side``: the
        engine reads no more than this, so a PDF page is drawn no larger (a fifth of the
        pixels of an A4 page at 200 dpi for the GPU engine's 1024); image files stay as
        stored."""
        data = self._fetch(source_key)
        try:
            if not source_key.endswith(".pdf"):
                return RenderedPage(self._load_image(data, index))
            return self._render_pdf(data, index, long_side)
        except PageRenderError:
            raise
        except Exception as error:
            raise PageRenderError(f"page cannot be rendered: {error}") from error

    def _fetch(self, key: str) -> bytes:
        with self._lock:  # GPU workers render from several task threads
            if key in self._files:
                self._files.move_to_end(key)
                return self._files[key]
        data = self.store.get(key)
        with self._lock:
            self._files[key] = data
            while len(self._files) > self._cached_files:
                self._files.popitem(last=False)
        return data

    def _render_pdf(self, data: bytes, index: int, long_side: int | None) -> RenderedPage:
        try:
            with pymupdf.open(stream=data, filetype="pdf") as doc:
                page = doc.load_page(index)
                # max_render_side always holds: a 20000 pt page is drawn below 36 dpi if need be.
                full = render_matrix(page.rect, dpi=self.dpi, max_side=self.max_side)
                size = _pixel_size(page, full)
                matrix = full
                if long_side is not None and max(size) > long_side:
                    matrix = render_matrix(page.rect, dpi=self.dpi, max_side=long_side)
                pix = page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False)
                shape = (pix.height, pix.width, 3)  # (H, W, 3)
                pixels = np.frombuffer(pix.samples, dtype=np.uint8).reshape(shape).copy()
                rendered = RenderedPage(pixels, size=None if matrix is full else size)
                if doc.is_repaired:
                    return _repaired_page(rendered, index)
                _check_drawn(pixels, page.rect, full.a, index)
                return rendered
        finally:
            release_mupdf_store()  # ~0 ms a scanned page, ~4 ms a born-digital one
            log_mupdf_messages(page_index=index)

    def _load_image(self, data: bytes, index: int) -> np.ndarray:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(index)
            rgb = image.convert("RGB")
            if max(rgb.size) > self.max_side:
                rgb.thumbnail((self.max_side, self.max_side))
            return np.asarray(rgb, dtype=np.uint8).copy()


def render_matrix(rect: pymupdf.Rect, *, dpi: int, max_side: int) -> pymupdf.Matrix:
    """Scale to ``dpi``, or less so that the longer side is at most ``max_side`` pixels."""
    longest_points = max(rect.width, rect.height, 1.0)
    zoom = min(dpi / 72, max_side / longest_points)
    return pymupdf.Matrix(zoom, zoom)


def _pixel_size(page: pymupdf.Page, matrix: pymupdf.Matrix) -> tuple[int, int]:
    """(width, height) of the pixmap ``matrix`` draws: MuPDF rounds the transformed page box."""
    box = page.rect.transform(matrix).irect
    return box.width, box.height


# Below this, a page drawn within max_render_side shows no legible mark (a 10^6-point page).
MIN_LEGIBLE_DPI = 18


def _check_drawn(pixels: np.ndarray, rect: pymupdf.Rect, zoom: float, index: int) -> None:
    """A page that draws nothing because it is damaged (MuPDF complained while drawing it: a
    broken content stream, a page object that is not one) or absurd (so large that within
    max_render_side it is drawn at a few dpi) fails with the reason. A page that is truly
    blank (MuPDF drew it without a word) stays a read, empty page."""
    if not pixels.size or pixels.min() != pixels.max():
        return
    said = pymupdf.TOOLS.mupdf_warnings(reset=False)  # read, left for the log line
    if said:
        raise PageRenderError(
            f"page {index + 1} of the PDF is damaged: it draws nothing "
            f"(MuPDF: {said.splitlines()[0][:200]})"
        )
    if 72 * zoom < MIN_LEGIBLE_DPI:
        raise PageRenderError(
            f"page {index + 1} of the PDF is unrenderable: {rect.width:,.0f} x "
            f"{rect.height:,.0f} points, drawn at {72 * zoom:.1f} dpi within max_render_side "
            "it shows nothing"
        )


def _repaired_page(rendered: RenderedPage, index: int) -> RenderedPage:
    """A repaired file's page that draws nothing lost its content with the damage (a truncated
    PDF's last pages): failed with the reason, never a silent blank success."""
    pixels = rendered.pixels
    if pixels.size and pixels.min() == pixels.max():
        raise PageRenderError(
            f"page {index + 1} of the PDF is damaged (truncated or corrupt): it renders empty"
        )
    return RenderedPage(pixels, (REPAIRED_WARNING,), rendered.size)


def render_many(
    rasterizer: PageRasterizer, refs: list[tuple[str, int]], long_side: int | None = None
) -> list[RenderedPage | PageRenderError]:
    """Render in order in this process; a page that fails is returned as its error."""
    results: list[RenderedPage | PageRenderError] = []
    for key, index in refs:
        try:
            results.append(rasterizer.render_page(key, index, long_side))
        except PageRenderError as error:
            results.append(error)
    return results


class RenderProcessCrashed(RuntimeError):
    """Drawing these pages ended a render process twice: the group fails and runs again (a
    page that crashes MuPDF every time gives the group up after its attempts)."""


class ProcessRasterizer:
    """Rendering in CPU processes beside the task: PyMuPDF holds the GIL for a whole page (9 s
    for a heavy one), which starved the lease-renewal thread until the group was taken over
    while its worker was alive, and left a GPU worker's decode loop waiting. Each process keeps
    its own object-store client and file cache.

    A render process that dies (MuPDF crashing on a page, the kernel's OOM killer) breaks the
    whole pool: every run in it fails and later submits are refused. A new pool takes its place
    and each run caught in the break is drawn once more there; one that breaks the new pool too
    fails its group (``RenderProcessCrashed``). Without this, one crash made the worker fail
    every group it took until their pages gave up."""

    def __init__(
        self,
        s3: S3Settings,
        *,
        dpi: int,
        max_side: int,
        processes: int,
        metrics: RenderObserver | None = None,
    ) -> None:
        self.metrics = metrics
        _allow_children()
        self._start = functools.partial(
            ProcessPoolExecutor,
            processes,
            mp_context=multiprocessing.get_context("spawn"),  # no CUDA or DB pools inherited
            initializer=_start_renderer,
            initargs=(s3, dpi, max_side),
        )
        self._lock = threading.Lock()
        self.pool = self._start()
        self.restarts = 0

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run other PyMuPDF work in these processes, for the same reason: a module-level
        ``function`` that reads stored files through ``process_store()``."""
        return self._result(_Task(function, args, *self._submit_task(function, args)))

    def render_many(
        self, refs: list[tuple[str, int]], long_side: int | None = None
    ) -> list[RenderedPage | PageRenderError]:
        return self._collect(self._submit(refs, long_side))

    def _submit_task(self, function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, Any]:
        """(pool, future): on the current pool, or on a new one if it is broken."""
        pool = self.pool
        try:
            return pool, pool.submit(function, *args)
        except BrokenProcessPool:
            pool = self._renewed(pool)
            return pool, pool.submit(function, *args)

    def _renewed(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        """A new pool in place of ``broken``; threads that find it broken together start one."""
        with self._lock:
            if self.pool is broken:
                broken.shutdown(wait=False, cancel_futures=True)
                self.pool = self._start()
                self.restarts += 1
                log.warning("render_pool.restarted", restarts=self.restarts)
            return self.pool

    def _result(self, task: _Task) -> Any:
        """The task's result; drawn once more on a new pool if its pool broke meanwhile."""
        try:
            return task.future.result()
        except BrokenProcessPool:
            self._renewed(task.pool)
        pool, future = self._submit_task(task.function, task.args)
        try:
            return future.result()
        except BrokenProcessPool as error:
            self._renewed(pool)
            raise RenderProcessCrashed(f"{task}: ended a render process twice") from error

    def _submit(self, refs: list[tuple[str, int]], long_side: int | None) -> list[_Rendering]:
        """Start rendering ``refs`` in the pool. The pages of one file in a row (a page
        group's) go to one process together: it fetches the file once, where page by page each
        process fetched it again (a 7 MB scan, nine times a group). A lone group so draws its
        pages one after another (~0.25 s for nine), which its decode dwarfs."""
        submitted = time.monotonic()
        renderings: list[_Rendering] = []
        for key, run in itertools.groupby(refs, key=lambda ref: ref[0]):
            indices = [index for _, index in run]
            args = (key, indices, long_side)
            task = _Task(_render_run, args, *self._submit_task(_render_run, args))
            renderings += [_Rendering(task, n, submitted) for n in range(len(indices))]
        return renderings

    def _collect(self, renderings: list[_Rendering]) -> list[RenderedPage | PageRenderError]:
        """Each page in order, or why it could not be drawn."""
        results: list[RenderedPage | PageRenderError] = []
        drawn: dict[int, list[_TimedRender | PageRenderError]] = {}  # by task: drawn once
        for rendering in renderings:
            task = rendering.task
            if id(task) not in drawn:
                drawn[id(task)] = self._result(task)
            timed = drawn[id(task)][rendering.position]
            if isinstance(timed, PageRenderError):
                results.append(timed)
                continue
            results.append(timed.page)
            if self.metrics is not None:  # waited: submit to start, on the pool's own clock
                waited = max(0.0, timed.started - rendering.submitted)
                self.metrics.page_rendered(seconds=timed.seconds, waited=waited)
        return results


@dataclass(frozen=True)
class _Task:
    """Work given to the render processes, and where: enough to give it again."""

    function: Callable[..., Any]
    args: tuple[Any, ...]
    pool: ProcessPoolExecutor
    future: Future[Any]

    def __str__(self) -> str:
        if self.function is _render_run:
            key, indices, _ = self.args
            return f"drawing pages {', '.join(str(i + 1) for i in indices)} of {key}"
        return getattr(self.function, "__name__", "a task")


@dataclass(frozen=True)
class _Rendering:
    """A page given to the render processes: the task drawing its run of pages, its place in
    the run, and when it was given (``time.monotonic``)."""

    task: _Task
    position: int
    submitted: float


class RenderObserver(Protocol):
    def page_rendered(self, *, seconds: float, waited: float) -> None: ...


@dataclass(frozen=True)
class _TimedRender:
    page: RenderedPage
    started: float  # when its run's process took it up (time.monotonic(): one clock on Linux)
    seconds: float


def _allow_children() -> None:
    """Celery's prefork children (billiard) are daemonic, and multiprocessing refuses a daemonic
    process children; their auth key is billiard's, which multiprocessing's spawn cannot pass
    on. Ours are safe to allow: each exits when its parent is gone (``_exit_with``)."""
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    config["daemon"] = False
    config["authkey"] = AuthenticationString(bytes(config["authkey"]))


def _exit_with(parent_pid: int) -> None:
    """A render process outlives nothing: a SIGKILLed or recycled worker takes it along."""
    while os.getppid() == parent_pid:
        time.sleep(1)
    os._exit(0)


class _Renderer:
    """The renderer of one pool process (set by the pool's initializer)."""

    current: PageRasterizer | None = None


def _start_renderer(s3: S3Settings, dpi: int, max_side: int) -> None:
    configure_logging("info")  # a spawned process: its lines must be JSON like its parent's
    watch = threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True)
    watch.start()
    _Renderer.current = PageRasterizer(make_object_store(s3), dpi=dpi, max_side=max_side)


def process_store() -> ObjectStore:
    """The object store of the render process this runs in."""
    assert _Renderer.current is not None, "only inside a ProcessRasterizer's process"
    return _Renderer.current.store


def _render_run(
    key: str, indices: list[int], long_side: int | None
) -> list[_TimedRender | PageRenderError]:
    """Pages of one file, in order; a page that cannot be drawn is returned as its error."""
    renderer = _Renderer.current
    assert renderer is not None
    results: list[_TimedRender | PageRenderError] = []
    taken = time.monotonic()  # when a process was free for the run: every page's wait ends here
    for index in indices:
        started = time.monotonic()
        try:
            page = renderer.render_page(key, index, long_side)
        except PageRenderError as error:
            results.append(error)
            continue
        results.append(_TimedRender(page, taken, time.monotonic() - started))
    return results
