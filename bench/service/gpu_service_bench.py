"""The GPU worker through the whole service against the bare engine, on one GPU, in one run.

Service: documents submitted to the API of the stack ``bench/gpu_stack.sh`` starts (Postgres,
Redis, the S3 server, API, control worker, ``uocr worker --gpus all``), rendered by the worker's
render processes, through the vision tower, decoded in page groups, stored; timed from the first
submit to the last page stored (the jobs' own ``created_at``/``finished_at``). Bare: the same
engine class in this process on the same pages rendered beforehand, ``concurrency`` threads each
running one document's page groups in order, as the worker's threads do. Random weights never
stop by themselves, so every page decodes exactly ``--page-tokens`` tokens (the page guard closes
it and forces the next page's marker).

On the GPU machine, after ``bash bench/gpu_stack.sh install DIR...``:

    python -m bench.service.gpu_service_bench --checkpoint /tmp/uocr-v1 --concurrency 16 128 \
        --out $OUT

Prints one table and writes ``gpu_service_bench_<card>_<date>[_<label>].json`` in ``--out``
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
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil

from bench import harness

STACK = Path(os.environ.get("GPU_STACK_DIR", "/tmp/uocr-stack"))
API = "http://127.0.0.1:8100"
GROUP_SIZE = 8


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


def _rates(pages: int, wall: float, before: dict, after: dict) -> dict:  # type: ignore[type-arg]
    from ocr_worker.stage_clock import COUNTS

    grown = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    steps = grown.get("steps", 0)
    return {
        "pages": pages,
        "seconds": round(wall, 2),
        "pages_per_s": round(pages / wall, 2),
        "tokens_per_s": round(grown.get("tokens", 0) / wall, 1),
        "stage_ms_per_page": {
            k: round(v * 1000 / pages, 2) for k, v in grown.items() if k not in COUNTS
        },
        "gpu_idle_fraction": round(grown.get("idle", 0.0) / wall, 3),
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
            "pages": "pages a document, taken in turn",
            "documents": "service: documents per run, at least the concurrency (e.g. 64 at 16 "
            "groups: memory after each document past the in-flight set, for a leak)",
            "rounds": "service: run the documents this many times on one worker; the worker's "
            "idle memory after each round (memory_idle.after_rounds)",
        },
    )
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--page-tokens", type=int, default=128)
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
    if not (args.checkpoint / "config.json").exists():
        from bench.engine.full_checkpoint import write_full_checkpoint

        write_full_checkpoint(args.checkpoint)
    os.environ.update(
        {
            "UOCR_MODEL_PATH": str(args.checkpoint),
            "UOCR_UNLIMITED_OCR__MAX_TOKENS_PER_PAGE": str(args.page_tokens),
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
    distinct = make_documents(min(most, args.distinct), args.pages)
    backlog = args.documents_per_slot
    count = max(most * backlog, args.documents)
    documents = [distinct[i % len(distinct)] for i in range(count)]
    card = harness.card()
    folder = args.out or harness.RESULTS
    out = harness.result_path(folder, card, args.label)
    report: dict = json.loads(out.read_text()) if out.exists() else {}  # type: ignore[type-arg]
    report.update(page_tokens=args.page_tokens, distinct_documents=len(distinct))
    report["commands"] = [*report.get("commands", []), shlex.join(sys.argv)]

    def save() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(harness.stamp(report, card), indent=1))

    if "bare" in args.sides:
        from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine

        os.environ["UOCR_MAX_CONCURRENCY"] = str(most)  # fewer threads bound the smaller runs
        settings = load_settings()
        engine = UnlimitedOcrEngine.from_settings(settings)
        long_side = engine.input_long_side(GROUP_SIZE)
        rendered = render_all(distinct, settings.worker.render_dpi, long_side)
        for pages in args.vision_batch_pages or [engine.vision.max_pages]:
            engine.vision.max_pages = pages
            report["bare"] = report[f"bare_vision_batch_{pages}"] = {}
            for c in args.concurrency:
                report["bare"][str(c)] = bare(engine, settings, rendered, c * backlog, c)
                report["bare"][str(c)]["documents_per_slot"] = backlog
                print(f"bare (vision calls of up to {pages} pages)", c, report["bare"][str(c)])
                save()
    if "service" in args.sides or args.kill:
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
            report[side] = {}
            for c in args.concurrency:
                docs = documents[: max(c * backlog, args.documents)]
                report[side][str(c)] = service(
                    client, docs, c, args.engine_process, args.rounds - 1
                )
                report[side][str(c)]["documents_per_slot"] = backlog
                brief = {k: v for k, v in report[side][str(c)].items() if k != "memory"}
                print(side, c, brief, flush=True)
                save()
    save()
    print(f"results: {out}")
    print_table(report)


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
