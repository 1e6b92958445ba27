"""The GPU worker through the whole service against the bare engine, on one GPU, in one run.

Service: documents submitted to the API of the stack ``bench/gpu_stack.sh`` starts (Postgres,
Redis, the S3 server, API, control worker, ``uocr worker --gpus all``), rendered by the worker's
render processes, through the vision tower, decoded in page groups, stored. Bare: the same
engine class in this process on the same pages rendered beforehand, ``concurrency`` threads each
running one document's page groups in order, as the worker's threads do. Random weights never
stop by themselves, so the page guard closes each page at its budget and forces the next page's
marker: every page ``--page-tokens`` tokens, or with ``--page-tokens-mix real`` each page its own
length drawn from the shape of the real model's output, at a mean of ``--page-tokens-mean``
(bench/service/page_lengths.py: the same page, the same length, on both sides).

Two ways to time a run. By default the whole run, from the first submit to the last page stored
(the jobs' own ``created_at``/``finished_at``). With ``--window-groups W``, the steady state: the
first ``concurrency`` groups finished are the ramp (graphs captured, every slot's first prefill),
then the next max(W, concurrency) groups finished are the window timed; then every open page
closes at once (page_lengths.Drain) and the rest is canceled. That is how documents of 20 to
300 pages (``--doc-pages 20 300``, built from ``--pool-pages`` distinct scanned pages) can be
measured at 128 slots in minutes: a 300-page document alone takes its 38 groups one after another.

On the GPU machine, after ``bash bench/gpu_stack.sh install DIR...``:

    python -m bench.service.gpu_service_bench --checkpoint /tmp/uocr-v1 --concurrency 16 128 \
        --out $OUT
    python -m bench.service.gpu_service_bench --checkpoint /tmp/uocr-v1 --concurrency 16 64 128 \
        --page-tokens-mix real --doc-pages 20 300 --window-groups 48 --documents-per-slot 2 \
        --engine-process --out $OUT

Prints one table (pages/s, tokens/s, GPU idle, the vision tower, $ per million pages at
``--price-per-hour``) and writes ``gpu_service_bench_<card>_<date>[_<label>].json`` in ``--out``
(each run on the same day adds its sides to the same file); ``--kill`` adds a worker killed mid-way
through a 100-page document, ``--bare``/``--service`` choose the sides.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil

from bench import harness
from bench.service import page_lengths
from bench.service.page_lengths import Drain, PageLengths

STACK = Path(os.environ.get("GPU_STACK_DIR", "/tmp/uocr-stack"))
API = "http://127.0.0.1:8100"
GROUP_SIZE = 8
# $ an hour of one card where --price-per-hour names none: olmOCR's H100 figure (the issue's
# goal), and for an H200 an assumed on-demand price (no peer publishes one for its cost plot).
PRICES = {"h100": 2.69, "h200": 3.50}


# -- documents ---------------------------------------------------------------------------------


def _document(args: tuple[int, int]) -> bytes:
    from tests.factories import sample_pages, scanned_pdf

    seed, pages = args
    return scanned_pdf(sample_pages(pages, lines=12, seed=seed), seed=seed)


def make_documents(count: int, pages: list[int]) -> list[bytes]:
    """``count`` distinct scans (sizes taken in turn from ``pages``), the same on every run."""
    with ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 1)) as pool:
        return list(pool.map(_document, [(i, pages[i % len(pages)]) for i in range(count)]))


def _render(args: tuple[bytes, int, int | None]) -> list:  # type: ignore[type-arg]
    import tempfile

    import pymupdf

    from ocr_worker.engines.base import PageImage
    from ocr_worker.imaging import PageRasterizer
    from uocr_core.storage import LocalObjectStore

    pdf, dpi, long_side = args
    with tempfile.TemporaryDirectory() as folder:
        store = LocalObjectStore(Path(folder))
        store.put("doc.pdf", pdf)
        rasterizer = PageRasterizer(store, dpi=dpi, max_side=4000)
        count = pymupdf.open(stream=pdf).page_count
        pages = [rasterizer.render_page("doc.pdf", i, long_side) for i in range(count)]
        return [PageImage(i + 1, page.pixels, page.size) for i, page in enumerate(pages)]


def render_all(documents: list[bytes], dpi: int, long_side: int | None) -> list[list]:  # type: ignore[type-arg]
    """Each distinct document's pages, as the worker renders them (its rasterizer, its dpi, no
    larger than the engine reads)."""
    with ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 1)) as pool:
        return list(pool.map(_render, [(pdf, dpi, long_side) for pdf in documents]))


# Documents of 20 to 300 pages, built from a pool of distinct scanned pages: each document its
# own page count and its own order of the pool's pages, the same on every run. A PDF holds each
# pool image once however many pages show it, so 256 documents of up to 300 pages upload ~1 GB,
# not ~7, and the bare engine renders the pool's pages once.


def page_pool(count: int, seed: int = 1000) -> tuple[bytes, list[bytes]]:
    """A ``count``-page scan (the factories' scanner, as ``make_documents``) and each of its
    pages' JPEG, to build the documents from."""
    import pymupdf

    pool = _document((seed, count))
    opened = pymupdf.open(stream=pool)
    pages = [opened[i] for i in range(opened.page_count)]
    jpegs = [opened.extract_image(page.get_images()[0][0])["image"] for page in pages]
    return pool, jpegs


def document_plans(count: int, low: int, high: int, pool: int, seed: int = 0) -> list[list[int]]:
    """``count`` documents: each a list of pool indexes, one a page; page counts log-uniform
    in [low, high] (half the documents under sqrt(low * high), ~77 pages for 20-300)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(count):
        pages = int(round(float(np.exp(rng.uniform(np.log(low), np.log(high))))))
        order = rng.permutation(pool)
        plans.append([int(order[k % pool]) for k in range(min(max(pages, low), high))])
    return plans


def _build(args: tuple[list[int], list[bytes]]) -> bytes:
    import pymupdf

    plan, jpegs = args
    out = pymupdf.open()
    for index in plan:
        page = out.new_page(width=595, height=842)  # the factories' scans' size
        page.insert_image(page.rect, stream=jpegs[index])
    return out.tobytes(garbage=3, deflate=True)  # each image once, whatever shows it


def build_documents(plans: list[list[int]], jpegs: list[bytes]) -> list[bytes]:
    with ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 1)) as pool:
        return list(pool.map(_build, [(plan, jpegs) for plan in plans]))


# -- the bare engine ---------------------------------------------------------------------------


def bare(engine, settings, rendered: list[list], documents: int, concurrency: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """Pages/s and tokens/s of the engine class alone: ``concurrency`` threads, each running
    one document's groups in order (as the worker's threads do), ``documents`` in all."""
    from ocr_worker.engines.base import PageGroupInput
    from ocr_worker.stage_clock import clock
    from uocr_core.page_groups import PageGroupPlanner

    planner = PageGroupPlanner(size=settings.page_group_size, overlap=settings.page_group_overlap)

    def document(index: int) -> int:
        pages = rendered[index % len(rendered)]
        job = f"bare-{concurrency}-{index}"
        groups = planner.plan(len(pages))
        for g in groups:
            context = pages[g.first_position : g.first_position + g.overlap]
            output = [pages[p] for p in g.output_positions]
            group = PageGroupInput(job, g.group_index, context, output, g is groups[-1])
            results = engine.run_group(group)
            assert [r.page for r in results] == [p.page_no for p in output]
        engine.end_document(job)
        return len(pages)

    # Warm-up at the run's own concurrency (up to 16 documents): the step's CUDA graphs and
    # kernel tiles are made per batch size; warmed by one document alone, the first 16-group run
    # in a process measured 15 pages/s where the next measured 25.
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(document, range(min(concurrency, 16))))
    before = clock.totals()
    with harness.Stopwatch() as watch, ThreadPoolExecutor(concurrency) as pool:
        pages = sum(pool.map(document, range(documents)))
    return _rates(pages, watch.seconds, before, after=clock.totals())


def bare_window(  # type: ignore[no-untyped-def]
    engine,
    settings,
    pages_of: Callable[[int], list],  # type: ignore[type-arg]
    documents: int,
    concurrency: int,
    window: int,
    drain: Drain,
) -> dict:  # type: ignore[type-arg]
    """The steady state of ``concurrency`` threads, each taking the next of ``documents``
    documents when its own is done: after the first ``concurrency`` groups finished (the ramp),
    the next max(``window``, ``concurrency``) timed; then the groups in flight drain (every
    open page closes at once) and no thread takes another group."""
    from ocr_worker.engines.base import PageGroupInput
    from ocr_worker.stage_clock import clock
    from uocr_core.page_groups import PageGroupPlanner

    planner = PageGroupPlanner(size=settings.page_group_size, overlap=settings.page_group_overlap)
    target = concurrency + max(window, concurrency)
    lock, stop = threading.Lock(), threading.Event()
    taken = iter(range(documents))
    done: list[tuple[float, int, dict]] = []  # type: ignore[type-arg]

    def slot(_: int) -> None:
        while not stop.is_set():
            with lock:
                index = next(taken, None)
            if index is None:
                return
            pages, job = pages_of(index), f"bare-{concurrency}-{index}"
            groups = planner.plan(len(pages))
            try:
                for g in groups:
                    if stop.is_set():
                        break
                    context = pages[g.first_position : g.first_position + g.overlap]
                    output = [pages[p] for p in g.output_positions]
                    group = PageGroupInput(job, g.group_index, context, output, g is groups[-1])
                    results = engine.run_group(group)
                    assert [r.page for r in results] == [p.page_no for p in output]
                    with lock:
                        done.append((time.perf_counter(), len(output), clock.totals()))
                        if len(done) >= target:
                            stop.set()
                            drain.set()
            finally:
                engine.end_document(job)

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(slot, range(concurrency)))
    finally:
        drain.clear()
    return _window(done, concurrency, window, started)


def _window(done: list[tuple[float, int, dict]], ramp: int, window: int, started: float) -> dict:  # type: ignore[type-arg]
    """Rates over the groups finished after the first ``ramp``, up to max(window, ramp) of
    them: (when, pages, the stage totals then) each, in the order they finished."""
    if len(done) < 2:
        return {"pages": 0, "error": f"{len(done)} groups finished", "window": {}}
    end = min(len(done), ramp + max(window, ramp))
    first = max(1, min(ramp, end - 4))  # a run that ran out of documents: its last groups
    t0, _, before = done[first - 1]
    t1, _, after = done[end - 1]
    result = _rates(sum(p for _, p, _ in done[first:end]), max(t1 - t0, 1e-6), before, after)
    result["window"] = {
        "ramp_groups": first,
        "groups": end - first,
        "complete": end - first == max(window, ramp),
        "ramp_seconds": round(t0 - started, 1),
        "groups_finished_in_run": len(done),
        "run_seconds": round(done[-1][0] - started, 1),
    }
    return result


def _rates(pages: int, wall: float, before: dict, after: dict) -> dict:  # type: ignore[type-arg]
    from ocr_worker.stage_clock import COUNTS

    grown = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    steps = grown.get("steps", 0)
    return {
        "pages": pages,
        "seconds": round(wall, 2),
        "pages_per_s": round(pages / wall, 2),
        "tokens_per_s": round(grown.get("tokens", 0) / wall, 1),
        "tokens_per_page": round(grown.get("tokens", 0) / pages, 1) if pages else None,
        "stage_ms_per_page": {
            k: round(v * 1000 / pages, 2) for k, v in grown.items() if k not in COUNTS
        },
        "gpu_idle_fraction": round(grown.get("idle", 0.0) / wall, 3),
        # The tower's calls' wall time (each synced on its stream), a page and of the run's:
        # the card's time it holds, beside the decode steps on their own stream.
        "vision_ms_per_page": round(grown.get("vision", 0.0) * 1000 / pages, 2) if pages else None,
        "vision_share": round(grown.get("vision", 0.0) / wall, 3),
        # How full the decode steps ran, and how long each took, inside this run
        "sequences_per_step": round(grown.get("step_rows", 0) / steps, 1) if steps else None,
        "ms_per_step": round(grown.get("decode", 0) * 1000 / steps, 2) if steps else None,
    }


# -- the service -------------------------------------------------------------------------------


def stack(command: str) -> None:
    subprocess.run(["bash", "bench/gpu_stack.sh", command], check=True)


def api_key() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "uocr_cli.main", "keys", "create", "--tenant", "bench"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("api_key="))


def worker_log() -> list[dict]:  # type: ignore[type-arg]
    lines = []
    for line in (STACK / "logs" / "gpu-worker.log").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):  # a line cut off by a kill
                lines.append(json.loads(line))
    return lines


def stage_totals() -> dict:  # type: ignore[type-arg]
    finished = [e for e in worker_log() if e.get("event") == "page_group.finished"]
    return finished[-1].get("stage_totals", {}) if finished else {}


def steady_state(finished: list[dict]) -> dict:  # type: ignore[type-arg]
    """The decode loop from a quarter to three quarters of the way through a run's finished
    groups, from the stage totals each ``page_group.finished`` line carries. The run's start
    (the first groups upload, claim and render before anything decodes) and its tail (the last
    documents' final groups, fewer than the slots) are left out, so that a wait for the CPU
    side in steady running shows apart from them."""
    if len(finished) < 20:
        return {}
    first, last = finished[len(finished) // 4], finished[len(finished) * 3 // 4]
    seconds = (_when(last["timestamp"]) - _when(first["timestamp"])).total_seconds()
    grown = {
        k: last["stage_totals"].get(k, 0.0) - first["stage_totals"].get(k, 0.0)
        for k in ("idle", "steps", "step_rows")
    }
    return {
        "seconds": round(seconds, 1),
        "gpu_idle_fraction": round(grown["idle"] / seconds, 3) if seconds else None,
        "sequences_per_step": round(grown["step_rows"] / grown["steps"], 1)
        if grown["steps"]
        else None,
    }


def _when(text: str) -> datetime:
    """An ISO time, in UTC when it names no zone (the API's and the log's may differ)."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def gpu_worker_process() -> psutil.Process:
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "celery" in cmdline and "-n gpu0@" in cmdline:
            return process
    raise RuntimeError("no GPU worker process (celery -n gpu0@...) is running")


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.NoSuchProcess:  # a render process recycled between listing and reading
        return 0


def _cpu_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


def engine_child(worker: psutil.Process) -> psutil.Process | None:
    """The worker's engine child (unlimited_ocr.engine_process): its largest child, the one
    holding the model; chosen once, before a run, so both snapshots read the same process."""
    return max(worker.children(recursive=True), key=_rss, default=None)


def cpu_snapshot(worker: psutil.Process, engine: psutil.Process | None) -> dict:  # type: ignore[type-arg]
    """CPU seconds so far of the worker's own process (its GIL: task threads, DB, S3, Celery),
    of its engine child (None: the engine runs in the worker's process), of the render
    processes (the other children), and of the whole machine (busy, all cores)."""
    others = [c for c in worker.children(recursive=True) if engine is None or c.pid != engine.pid]
    machine = psutil.cpu_times()
    return {
        "worker_main": _cpu_seconds(worker),
        "engine_child": _cpu_seconds(engine) if engine is not None else 0.0,
        "render": sum(_cpu_seconds(c) for c in others),
        "machine_busy": float(sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)),
    }


def cpu_use(before: dict, after: dict, wall: float, pages: int) -> dict:  # type: ignore[type-arg]
    """Cores each part kept busy over the run; render CPU per page. The worker's own process
    near 1.0 core means its GIL bounds the service, whatever the GPU could do."""
    grown = {k: after[k] - before[k] for k in before}
    return {
        "worker_main_cores": round(grown["worker_main"] / wall, 2),
        "engine_child_cores": round(grown["engine_child"] / wall, 2),
        "render_cores": round(grown["render"] / wall, 2),
        "render_cpu_ms_per_page": round(grown["render"] * 1000 / pages, 1),
        "machine_busy_cores": round(grown["machine_busy"] / wall, 2),
        "machine_cores": psutil.cpu_count(),
    }


def submit_all(client: httpx.Client, documents: list[bytes]) -> list[str]:
    def submit(item: tuple[int, bytes]) -> str:
        n, pdf = item
        response = client.post("/v1/jobs", files={"file": (f"doc{n}.pdf", pdf)})
        response.raise_for_status()
        return str(response.json()["id"])

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(submit, enumerate(documents)))


def wait_all(client: httpx.Client, ids: list[str], timeout: float, on_done=None) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    """Every job's final status; ``on_done(status)`` is called as each one finishes."""
    done: dict[str, dict] = {}  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(8) as pool:
        while len(done) < len(ids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(ids) - len(done)} jobs unfinished after {timeout} s")
            waiting = [i for i in ids if i not in done]
            for status in pool.map(lambda i: client.get(f"/v1/jobs/{i}").json(), waiting):
                if status["status"] in ("succeeded", "failed", "canceled"):
                    done[status["id"]] = status
                    if on_done:
                        on_done(status)
            time.sleep(0.5)
    return [done[i] for i in ids]


def service(  # type: ignore[type-arg]
    client: httpx.Client,
    documents: list[bytes],
    concurrency: int,
    engine_process: bool,
    extra_rounds: int = 0,
) -> dict:
    """The same documents through the service, the GPU worker running ``concurrency`` groups
    (then ``extra_rounds`` times more, for the worker's memory with nothing in flight)."""
    os.environ["UOCR_MAX_CONCURRENCY"] = str(concurrency)
    stack("worker")  # restarted with this concurrency; the model loads before it takes work
    warm = submit_all(client, documents[: min(concurrency, 16)])  # as the bare engine warms up
    wait_all(client, warm, 600)
    worker = gpu_worker_process()
    memory: list[dict] = []  # type: ignore[type-arg]
    time.sleep(5)  # the warm-up's last threads return their pages
    idle_before = _worker_rss(worker)  # nothing in flight

    def sample(status: dict) -> None:  # type: ignore[type-arg]
        memory.append({"job": status["id"], **_worker_rss(worker)})

    engine = engine_child(worker) if engine_process else None
    before, clock_started = stage_totals(), time.monotonic()
    cpu_before = cpu_snapshot(worker, engine)
    ids = submit_all(client, documents)
    statuses = wait_all(client, ids, 3600, on_done=sample)
    after, cpu_after = stage_totals(), cpu_snapshot(worker, engine)
    polled = time.monotonic() - clock_started
    assert all(s["status"] == "succeeded" for s in statuses), [s["status"] for s in statuses]
    started = min(_when(s["created_at"]) for s in statuses)
    ended = max(_when(s["finished_at"]) for s in statuses)
    pages = sum(s["pages_total"] for s in statuses)
    result = _rates(pages, (ended - started).total_seconds(), before, after)
    result["cpu"] = cpu_use(cpu_before, cpu_after, polled, pages)
    log = worker_log()  # read once: at 128 groups it holds thousands of lines
    result["steady"] = steady_state(
        [
            e
            for e in log
            if e.get("event") == "page_group.finished" and started <= _when(e["timestamp"]) <= ended
        ]
    )
    done = [e for e in log if e.get("event") == "engine.document_done"]
    reserved = {e["job_id"]: e["gpu_reserved_bytes"] for e in done}
    for row in memory:
        row["gpu_reserved_bytes"] = reserved.get(row["job"])
    result["memory"] = memory
    result["memory_growth_after_warmup"] = {
        key: _growth([row[key] for row in memory if row.get(key)])
        for key in ("rss_bytes", "gpu_reserved_bytes")
    }
    # The samples above come while other documents are in flight, so they rise and fall with
    # the groups held (+-3% on the H200). With nothing in flight, after the warm-up (at most 16
    # documents) and after the run, what is left is what the worker kept: a leak, or memory
    # its allocator holds from the run's larger working set.
    time.sleep(5)  # the last group's threads return their pages
    idle_after = _worker_rss(worker)
    result["memory_idle"] = {
        "before": idle_before,
        "after": idle_after,
        "growth": {
            k: round(idle_after[k] / idle_before[k] - 1, 4) if idle_before[k] else None
            for k in idle_before
        },
    }
    # Each further round runs the same documents again on the same worker: what the first run
    # left that the next one does not add to is its working set, not a leak.
    rounds = [idle_after]
    for _ in range(extra_rounds):
        again = wait_all(client, submit_all(client, documents), 3600)
        assert all(s["status"] == "succeeded" for s in again), [s["status"] for s in again]
        time.sleep(5)
        rounds.append(_worker_rss(worker))
    if extra_rounds:
        result["memory_idle"]["after_rounds"] = rounds
        result["memory_idle"]["growth_last_round"] = {
            k: round(rounds[-1][k] / rounds[-2][k] - 1, 4) if rounds[-2][k] else None
            for k in idle_before
        }
    return result


class LogTail:
    """The JSON lines a log gains from now on (a line half written waits for its end)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.rest = path, path.stat().st_size if path.exists() else 0, b""

    def lines(self) -> list[dict]:  # type: ignore[type-arg]
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        self.offset += len(data)
        *whole, self.rest = (self.rest + data).split(b"\n")
        out = []
        for line in whole:
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out


def service_window(  # type: ignore[type-arg]
    client: httpx.Client,
    documents: list[bytes],
    concurrency: int,
    engine_process: bool,
    window: int,
    timeout: float = 480,
    restart: bool = True,
) -> dict:
    """The steady state of the service at ``concurrency`` groups, as ``bare_window`` times the
    bare engine, from the worker's ``page_group.finished`` lines (their stage totals): the
    first ``concurrency`` groups the ramp, the next max(``window``, ``concurrency``) timed. Then
    the worker drains (page_lengths.DRAIN_ENV's file) and every job is canceled."""
    drain = STACK / "run" / "drain"
    drain.unlink(missing_ok=True)
    os.environ["UOCR_MAX_CONCURRENCY"] = str(concurrency)
    if restart:  # with this concurrency (~35 s on an H100); the model loads before it takes work
        stack("worker")
    worker = gpu_worker_process()
    engine = engine_child(worker) if engine_process else None
    tail = LogTail(STACK / "logs" / "gpu-worker.log")
    ids: list[str] = []
    started = time.time()
    submitter = threading.Thread(target=lambda: ids.extend(submit_all(client, documents)))
    submitter.start()  # the worker starts on the first documents while the rest upload
    target = concurrency + max(window, concurrency)
    done: list[tuple[float, int, dict]] = []  # type: ignore[type-arg]
    marks: dict[str, tuple[float, dict]] = {}  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while len(done) < target and time.monotonic() < deadline:
        for e in tail.lines():
            if e.get("event") == "page_group.finished":
                done.append((_when(e["timestamp"]).timestamp(), e["pages"], e["stage_totals"]))
        for name, at in (("start", concurrency), ("end", target)):
            if len(done) >= at and name not in marks:
                marks[name] = (time.monotonic(), cpu_snapshot(worker, engine))
        time.sleep(0.25)
    drain.touch()  # every open page closes at once: the groups in flight end in a few steps
    submitter.join()
    marks.setdefault("start", (time.monotonic(), cpu_snapshot(worker, engine)))
    marks.setdefault("end", (time.monotonic(), cpu_snapshot(worker, engine)))

    def cancel(job: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            client.post(f"/v1/jobs/{job}/cancel")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(cancel, ids))
    try:
        jobs: dict = dict(Counter(s["status"] for s in wait_all(client, ids, 240)))  # type: ignore[type-arg]
    except TimeoutError as error:  # measured already: say so, and let the next run restart it
        jobs = {"not_settled": str(error)}
    result = _window(done, concurrency, window, started)
    (t0, cpu0), (t1, cpu1) = marks["start"], marks["end"]
    result["cpu"] = cpu_use(cpu0, cpu1, max(t1 - t0, 1e-6), max(1, result["pages"]))
    result["jobs"] = jobs
    result["documents"] = len(documents)
    return result


def _worker_rss(worker: psutil.Process) -> dict[str, int]:
    """The worker with its children (the render processes and, with engine_process, the model),
    the worker's own process, and its engine child (the child that names itself uocr-engine)."""
    own, engine, render = _rss(worker), 0, 0
    for child in worker.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.name() == "uocr-engine":
                engine += _rss(child)
                continue
        render += _rss(child)
    return {
        "rss_bytes": own + engine + render,
        "rss_worker_bytes": own,
        "rss_engine_bytes": engine,
    }


def _growth(samples: list[int]) -> float | None:
    """From the sample a tenth of the way in (warm-up over) to the last, as a fraction."""
    if len(samples) < 10:
        return None
    warm = samples[len(samples) // 10]
    return round((samples[-1] - warm) / warm, 4)


def killed_mid_document(client: httpx.Client, pdf: bytes) -> dict:  # type: ignore[type-arg]
    """SIGKILL the GPU worker once a 100-page document has some pages done; start a new one;
    the job must finish with every page exactly once."""
    [job] = submit_all(client, [pdf])
    deadline = time.monotonic() + 600
    while client.get(f"/v1/jobs/{job}").json()["pages_done"] < GROUP_SIZE:
        if time.monotonic() > deadline:
            raise TimeoutError("the 100-page document never got its first group done")
        time.sleep(0.2)
    done_at_kill = client.get(f"/v1/jobs/{job}").json()["pages_done"]
    gpu_worker_process().send_signal(signal.SIGKILL)
    started = time.perf_counter()
    stack("worker")
    ready = round(time.perf_counter() - started, 1)
    try:
        [status] = wait_all(client, [job], 300)
    except TimeoutError:  # say where it stands rather than hold the card for the whole loan
        status = client.get(f"/v1/jobs/{job}").json()
        control = (STACK / "logs" / "control.log").read_text(errors="replace").splitlines()
        return {
            "status": status["status"],
            "pages_done": status["pages_done"],
            "groups_done": f"{status['groups_done']} of {status['groups_total']}",
            "page_statuses": dict(Counter(p["status"] for p in status["pages"])),
            "control_log": [line for line in control if job in line][-10:],
        }
    result = client.get(f"/v1/jobs/{job}/result", params={"format": "json"}).json()
    pages = [p["page"] for p in result["pages"]]
    return {
        "status": status["status"],
        "pages_done_at_kill": done_at_kill,
        "pages": len(pages),
        "every_page_once": pages == list(range(1, status["pages_total"] + 1)),
        "new_worker_ready_in_s": ready,
        "recovered_in_s": round(time.perf_counter() - started, 1),
    }


def evidence(folder: Path, card: str, label: str | None) -> None:
    """The worker's start-up lines and nvidia-smi with the worker on the card, beside the
    results (``..._worker-startup.jsonl``, ``..._nvidia-smi.txt``)."""
    lines = ("engine.weights_loaded", "engine.ready", "worker.ready")
    startup = [e for e in worker_log() if e.get("event") in lines]
    named = lambda what, ext: harness.result_path(  # noqa: E731
        folder, card, "-".join(filter(None, [label, what])), ext=ext
    )
    named("worker-startup", "jsonl").write_text("\n".join(json.dumps(e) for e in startup) + "\n")
    smi = (
        subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
        if shutil.which("nvidia-smi")
        else "no nvidia-smi"
    )
    named("nvidia-smi", "txt").write_text(smi)
    print(smi)


# -- the run -----------------------------------------------------------------------------------


def main() -> None:
    parser = harness.parser(
        __doc__,
        concurrency=[16, 128],
        pages=[20, 24, 28],
        workspace_gb=32.0,
        documents=0,
        rounds=1,
        help={
            "out": "the folder the results go in (default: bench/results/)",
            "concurrency": "page groups at once a GPU, a run each",
            "pages": "pages a document, taken in turn (without --doc-pages)",
            "documents": "service: documents per run, at least the concurrency (e.g. 64 at 16 "
            "groups: memory after each document past the in-flight set, for a leak)",
            "rounds": "service: run the documents this many times on one worker; the worker's "
            "idle memory after each round (memory_idle.after_rounds)",
        },
    )
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--page-tokens", type=int, default=128, help="fixed: tokens every page")
    parser.add_argument(
        "--page-tokens-mix",
        choices=page_lengths.MIXES,
        default="fixed",
        help="fixed: every page --page-tokens; real: each page its own length, shaped like the "
        "real model's output (bench/service/page_lengths.py), at a mean of --page-tokens-mean",
    )
    parser.add_argument(
        "--page-tokens-mean",
        type=int,
        default=700,
        help="real: the mean tokens a page (the issue's goals: 700; 0: the shape's own, ~927)",
    )
    parser.add_argument("--length-seed", type=int, default=0, help="real: the draws' seed")
    parser.add_argument(
        "--doc-pages",
        type=int,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="documents of LOW to HIGH pages (log-uniform, seeded), built from --pool-pages "
        "distinct scanned pages, in place of --pages and --distinct",
    )
    parser.add_argument("--pool-pages", type=int, default=16, help="with --doc-pages")
    parser.add_argument(
        "--window-groups",
        type=int,
        default=0,
        help="time the steady state: after the first `concurrency` groups finished, the next "
        "max(this, concurrency); then drain and cancel the rest (0: the whole run, as before)",
    )
    parser.add_argument(
        "--price-per-hour",
        type=float,
        help=f"$ a card-hour for $ per million pages (default by card: {PRICES}; others 2.69)",
    )
    parser.add_argument("--distinct", type=int, default=32, help="distinct scans, used in turn")
    parser.add_argument("--sides", nargs="+", default=["bare", "service"])
    parser.add_argument("--kill", action="store_true")
    parser.add_argument(
        "--documents-per-slot",
        type=int,
        default=1,
        help="bare and service: documents per group slot (2 at 128 groups: 256 documents, a "
        "backlog; with one each the service can never hold its 128 slots, since a document's "
        "groups run one after another and each waits between them for its claim and render)",
    )
    parser.add_argument(
        "--vision-batch-pages",
        type=int,
        nargs="+",
        default=[],
        help="bare: run at each (1 = one group per vision call, as before the batcher), "
        "side by side; the last is the one compared with the service",
    )
    parser.add_argument(
        "--render-ahead",
        type=int,
        default=None,
        help="service: groups a worker takes beyond max_concurrency (worker.render_ahead_groups; "
        "unset: the default); results go under their own key, beside the default's",
    )
    parser.add_argument(
        "--engine-process",
        action="store_true",
        help="the worker runs its engine in a child process (unlimited_ocr.engine_process)",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    windowed = args.window_groups > 0
    if windowed and (args.kill or args.rounds > 1):
        parser.error("--window-groups: without --kill and --rounds (whole runs only)")
    real = args.page_tokens_mix == "real"
    lengths = PageLengths(
        args.page_tokens_mix, args.page_tokens_mean if real else args.page_tokens, args.length_seed
    )
    # Budgets a page of their own (real), or a drain at the window's end: the service's worker
    # reads both from here, its sitecustomize (page_lengths.SITECUSTOMIZE), in all its processes.
    per_page = real or windowed
    if not (args.checkpoint / "config.json").exists():
        from bench.engine.full_checkpoint import write_full_checkpoint

        write_full_checkpoint(args.checkpoint)
    os.environ.update(
        {
            "UOCR_MODEL_PATH": str(args.checkpoint),
            "UOCR_UNLIMITED_OCR__MAX_TOKENS_PER_PAGE": str(lengths.most()),
            "UOCR_VISUAL_CACHE_WORKSPACE_GB": str(args.workspace_gb),
            "UOCR_PAGE_GROUP_SIZE": str(GROUP_SIZE),
            # Enough room for every document at once: the bench measures the GPU, not admission.
            "UOCR_ADMISSION__WINDOW": "1024",
            "UOCR_ADMISSION__TENANT_MAX_IN_FLIGHT": "1024",
            "UOCR_QUEUE_MAX_SIZE": "1024",
            "UOCR_WORKER__LEASE_SECONDS": "20",
            "UOCR_WORKER__REDISPATCH_AFTER_SECONDS": "20",
            "UOCR_WORKER__RECONCILE_INTERVAL_SECONDS": "5",
            "UOCR_UNLIMITED_OCR__ENGINE_PROCESS": str(args.engine_process).lower(),
        }
    )
    side = "service_engine_process" if args.engine_process else "service"
    if args.render_ahead is not None:
        os.environ["UOCR_WORKER__RENDER_AHEAD_GROUPS"] = str(args.render_ahead)
        side += f"_ahead_{args.render_ahead}"
    from uocr_core.settings import load_settings

    most = max(args.concurrency)
    backlog = args.documents_per_slot
    count = max(most * backlog, args.documents)
    plans: list[list[int]] = []
    if args.doc_pages:
        pool_pdf, jpegs = page_pool(args.pool_pages)
        low, high = args.doc_pages
        plans = document_plans(count, low, high, args.pool_pages)
        distinct = [pool_pdf]
    else:
        distinct = make_documents(min(most, args.distinct), args.pages)
    card = harness.card()
    price = args.price_per_hour or PRICES.get(harness.card_tag(card), 2.69)
    folder = args.out or harness.RESULTS
    out = harness.result_path(folder, card, args.label)
    report: dict = json.loads(out.read_text()) if out.exists() else {}  # type: ignore[type-arg]
    report.update(
        page_tokens=lengths.most() if not real else None,
        page_lengths=lengths.summary(),
        distinct_documents=len(distinct) if not plans else None,
        documents={
            "count": count,
            "pages": [len(p) for p in plans] if plans else args.pages,
            "pool_pages": args.pool_pages if plans else None,
        },
        timing=f"window of {args.window_groups}" if windowed else "whole run",
        price_per_hour=price,
    )
    report["commands"] = [*report.get("commands", []), shlex.join(sys.argv)]

    def save() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(harness.stamp(report, card), indent=1))

    if "bare" in args.sides:
        from ocr_worker.engines.base import PageImage
        from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine

        os.environ["UOCR_MAX_CONCURRENCY"] = str(most)  # fewer threads bound the smaller runs
        settings = load_settings()
        drain = Drain()
        if per_page:
            page_lengths.install(UnlimitedOcrEngine, lengths, drain)
        engine = UnlimitedOcrEngine.from_settings(settings)
        long_side = engine.input_long_side(GROUP_SIZE)
        rendered = render_all(distinct, settings.worker.render_dpi, long_side)
        if plans:  # each page the pool's page it shows, drawn once
            pool = rendered[0]

            def pages_of(index: int) -> list[PageImage]:
                return [
                    PageImage(k + 1, pool[j].pixels, pool[j].size)
                    for k, j in enumerate(plans[index])
                ]
        else:

            def pages_of(index: int) -> list[PageImage]:
                return rendered[index % len(rendered)]  # type: ignore[no-any-return]

        for pages in args.vision_batch_pages or [engine.vision.max_pages]:
            engine.vision.max_pages = pages
            report["bare"] = report[f"bare_vision_batch_{pages}"] = {}
            for c in args.concurrency:
                if windowed:
                    try:
                        result = bare_window(
                            engine, settings, pages_of, count, c, args.window_groups, drain
                        )
                    except Exception as error:  # noqa: BLE001 - the next slot count still runs
                        result = {"error": repr(error)}
                else:
                    result = bare(engine, settings, rendered, c * backlog, c)
                report["bare"][str(c)] = result | {"documents_per_slot": backlog}
                print(f"bare (vision calls of up to {pages} pages)", c, result, flush=True)
                save()
        if plans:  # the lengths the documents' pages drew (first pages first, as runs take them)
            first = [pages_of(i) for i in range(min(count, 64))]
            drawn = [lengths.draw(p.page_no, p.pixels) for pages in first for p in pages]
            report["page_lengths_drawn"] = lengths.summary(drawn)
        del engine
    if "service" in args.sides or args.kill:
        documents = (
            build_documents(plans, jpegs)
            if plans
            else [distinct[i % len(distinct)] for i in range(count)]
        )
        if per_page:
            os.environ[page_lengths.ENV] = lengths.to_env()
            os.environ[page_lengths.DRAIN_ENV] = str(STACK / "run" / "drain")
            (STACK / "site").mkdir(parents=True, exist_ok=True)
            (STACK / "site" / "sitecustomize.py").write_text(page_lengths.SITECUSTOMIZE)
        os.environ["UOCR_MAX_CONCURRENCY"] = str(args.concurrency[0])
        stack("start")
        client = httpx.Client(base_url=API, timeout=120)
        client.headers["Authorization"] = f"Bearer {api_key()}"
        evidence(folder, card, args.label)  # while the worker holds the card
        if args.kill:  # first: a loan may end before the longer runs do
            report["kill"] = killed_mid_document(client, make_documents(1, [100])[0])
            print("kill", report["kill"], flush=True)
            save()
        if "service" in args.sides:
            # beside the slot counts an earlier run of the day measured (a rerun replaces its own)
            report[side] = report.get(side, {}) if windowed else {}
            for c in args.concurrency:
                docs = documents[: max(c * backlog, args.documents)]
                if windowed:
                    try:
                        result = service_window(
                            client,
                            docs,
                            c,
                            args.engine_process,
                            args.window_groups,
                            restart=c != args.concurrency[0],  # started at the first already
                        )
                    except Exception as error:  # noqa: BLE001 - the next slot count still runs
                        result = {"error": repr(error)}
                else:
                    result = service(client, docs, c, args.engine_process, args.rounds - 1)
                report[side][str(c)] = result | {"documents_per_slot": backlog}
                brief = {k: v for k, v in result.items() if k != "memory"}
                print(side, c, brief, flush=True)
                save()
    save()
    print(f"results: {out}")
    if not windowed:
        print_table(report)
    print_costs(report, card)


def dollars_per_million_pages(price_per_hour: float, pages_per_s: float) -> float:
    return price_per_hour / (pages_per_s * 3600) * 1e6


def print_costs(report: dict, card: str) -> None:  # type: ignore[type-arg]
    """Bare and service side by side at each slot count, with $ per million pages."""
    price = report.get("price_per_hour") or PRICES.get(harness.card_tag(card), 2.69)
    law = report.get("page_lengths", {})
    drawn = report.get("page_lengths_drawn", {})
    what = (
        f"{law.get('mix')} lengths, mean {law.get('tokens')} tokens a page"
        f" (p10/p50/p90 {law.get('p10_p50_p90')}, short pages {law.get('short_share')}"
        + (f"; the documents' first pages drew mean {drawn['mean']}" if drawn else "")
        + ")"
        if law.get("mix") == "real"
        else f"{law.get('tokens')} tokens every page"
    )
    print(
        f"\n{card}: {what}; groups of {GROUP_SIZE}; {report.get('timing')}; "
        f"${price:.2f} a card-hour (defaults: H100 {PRICES['h100']}, H200 {PRICES['h200']})"
    )
    print(
        "| slots | side | pages/s | tokens/s | tokens/page | GPU idle | vision ms/page | "
        "vision share | $/M pages | service/bare |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    bare = report.get("bare", {})
    services = sorted(k for k in report if k.startswith("service") and isinstance(report[k], dict))
    for c in sorted({*bare, *(c for k in services for c in report[k])}, key=int):
        rows = [("bare", bare.get(c))] + [(k, report[k].get(c)) for k in services]
        for name, r in rows:
            if not r or not r.get("pages"):
                continue
            b = bare.get(c) or {}
            ratio = (
                f"{r['pages_per_s'] / b['pages_per_s']:.2f}"
                if name != "bare" and b.get("pages_per_s")
                else ""
            )
            dollars = dollars_per_million_pages(price, r["pages_per_s"])
            print(
                f"| {c} | {name} | {r['pages_per_s']:.2f} | {r['tokens_per_s']:,.0f} | "
                f"{r.get('tokens_per_page') or '-'} | {r['gpu_idle_fraction']:.1%} | "
                f"{r.get('vision_ms_per_page') or '-'} | {r.get('vision_share', 0):.1%} | "
                f"${dollars:,.2f} | {ratio} |"
            )
    for side in ["bare", *services]:
        for c, r in report.get(side, {}).items():
            if r.get("pages"):
                print(side, c, "ms per page by stage:", r["stage_ms_per_page"], r.get("window", ""))


def print_table(report: dict) -> None:  # type: ignore[type-arg]
    print("\n| per GPU | bare pages/s | service pages/s | service/bare | bare tok/s | "
          "service tok/s | GPU idle (service) | in steady running |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    bare = report.get("bare", {})
    for key in sorted(k for k in report if k.startswith("service")):
        service = report[key]
        for c in sorted(service, key=int):
            b, s = bare.get(c, {}), service[c]
            ratio = f"{s['pages_per_s'] / b['pages_per_s']:.2f}" if "pages" in b else "-"
            print(
                f"| {c} groups ({key}) | {b.get('pages_per_s', '-')} | {s['pages_per_s']} | "
                f"{ratio} | {b.get('tokens_per_s', '-')} | {s['tokens_per_s']} | "
                f"{s['gpu_idle_fraction']} | {s.get('steady', {}).get('gpu_idle_fraction', '-')} |"
            )
    for side in ["bare", *sorted(k for k in report if k.startswith("service"))]:
        for c, r in report.get(side, {}).items():
            print(side, c, "ms per page by stage:", r["stage_ms_per_page"])


if __name__ == "__main__":
    main()
