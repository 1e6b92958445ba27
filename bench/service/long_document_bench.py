"""Long documents end to end through the whole service, each size side by side: a book of
scanned real pages (the accuracy corpus's CI pages, scanned as the suite scans them, repeated
to the length asked) submitted to a real API, read by a real OCR worker (the simulated engine
by default, or the CPU engine), assembled into every output; meanwhile clients poll its status
(the default summary) and the console's page window, and the console itself (headless
Chromium) draws the page grid.

Reports for each length: submit time, submit-to-done, the OCR worker's peak memory (its
largest process, and the whole tree), the assembly's time (last page recorded to job
finished), status p50/p95 and bytes a poll, the console's poll bytes and its grid's time to
draw, the bytes each output format stores, and that every output holds every page once and in
order. Needs ``bash .ci/services start`` (and ``bash .ci/setup-browser`` for the console):

    eval "$(bash .ci/services env)" && .venv/bin/python -m bench.service.long_document_bench \\
        --pages 300 3000
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import pymupdf
import redis

from bench import harness
from bench.accuracy.corpus import CI_DOCUMENTS, fetch
from bench.accuracy.runner import scan
from tests.conftest import TEST_SETTINGS_ENV, create_database, drop_database
from tests.e2e.processes import api_server, celery_worker, free_port, wait_http
from uocr_core.contracts import OCR_QUEUES
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.settings import load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import create_key

TERMINAL = ("succeeded", "failed", "canceled")
FORMATS = ("json", "markdown", "text", "jsonl", "hocr", "pdf")
WINDOW = 300  # the console's page window (ocr_api/console/static/js/views/job.js)


def book(pages: int) -> bytes:
    """The CI documents' scanned pages, in turn until ``pages``; repeated scans are stored
    once (garbage=4 merges identical images), so a 3,000-page upload stays small."""
    fetch(CI_DOCUMENTS)
    scans = [pymupdf.open(stream=scan(doc).pdf, filetype="pdf") for doc in CI_DOCUMENTS]
    out = pymupdf.open()
    while out.page_count < pages:
        for scanned in scans:
            take = min(scanned.page_count, pages - out.page_count)
            if take > 0:
                out.insert_pdf(scanned, to_page=take - 1)
    return out.tobytes(garbage=4, deflate=True)


class Sampler(threading.Thread):
    """Until stopped: the OCR worker tree's largest process and its sum (RSS, MB), and a
    poller's latencies and bytes."""

    def __init__(self, root: int | None, client: httpx.Client, path: str, every: float) -> None:
        super().__init__(daemon=True)
        self.root, self.client, self.path, self.every = root, client, path, every
        self.peak_process = self.peak_tree = 0.0
        self.latencies: list[float] = []
        self.sizes: list[int] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            if self.root is not None:  # one sampler watches the worker's memory
                self._memory(self.root)
            started = time.perf_counter()
            answer = self.client.get(self.path)
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.sizes.append(len(answer.content))
            self.halt.wait(self.every)

    def _memory(self, pid: int) -> None:
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
            sizes = [p.memory_info().rss / 2**20 for p in tree]
        except psutil.Error:
            return
        self.peak_process = max(self.peak_process, max(sizes))
        self.peak_tree = max(self.peak_tree, sum(sizes))


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def check_outputs(client: httpx.Client, job_id: str, pages: int) -> dict[str, int]:
    """Every output holds every page once and in order; the bytes each one stores."""
    numbers = list(range(1, pages + 1))
    bodies = {
        fmt: client.get(f"/v1/jobs/{job_id}/result", params={"format": fmt}).raise_for_status()
        for fmt in FORMATS
    }
    document = json.loads(bodies["json"].text)
    assert [p["page"] for p in document["pages"]] == numbers, "result.json"
    lines = [json.loads(line) for line in bodies["jsonl"].text.splitlines()]
    assert [p["page"] for p in lines] == numbers, "pages.jsonl"
    markdown = bodies["markdown"].text
    assert [int(c.split(" -->")[0]) for c in markdown.split("<!-- page ")[1:]] == numbers
    assert bodies["text"].text.count("\f") == pages - 1, "result.txt"
    assert bodies["hocr"].text.count('class="ocr_page"') == pages, "result.hocr"
    with pymupdf.open(stream=bodies["pdf"].content, filetype="pdf") as pdf:
        assert pdf.page_count == pages, "result.pdf"
    return {fmt: len(body.content) for fmt, body in bodies.items()}


def console_grid(api_url: str, api_key: str, job_id: str, pages: int) -> dict[str, float]:
    """The console's job view in headless Chromium while the job runs: time to draw every
    page's cell; then, once it ends, that every cell shows the page read; the bytes of its polls."""
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    service = webdriver.ChromeService(shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(f"{api_url}/console/")
        driver.find_element(By.ID, "api-key").send_keys(api_key, Keys.ENTER)
        time.sleep(1)
        started = time.perf_counter()
        driver.get(f"{api_url}/console/#/jobs/{job_id}")
        count = "return document.querySelectorAll('.page-cell').length"
        while driver.execute_script(count) < pages:
            time.sleep(0.05)
        drawn = time.perf_counter() - started
        done = "return document.querySelectorAll('.page-cell.status-succeeded').length"
        while driver.execute_script(done) < pages:
            time.sleep(0.5)
        polls = driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes('/v1/jobs/'))"
            ".map(e => [e.name, e.encodedBodySize, e.duration])"
        )
    finally:
        driver.quit()
    windowed = [size for name, size, _ in polls if "pages=all" not in name]
    return {
        "grid_drawn_s": drawn,
        "polls": len(polls),
        "windowed_polls": len(windowed),
        "poll_kb_median": statistics.median(size for _, size, _ in polls) / 1024,
        "first_poll_kb": polls[0][1] / 1024 if polls else 0,
    }


def run_length(pages: int, pdf: bytes, args: Any) -> dict[str, Any]:
    admin = os.environ["UOCR_TEST_DATABASE_URL"]
    tag = "long" + uuid.uuid4().hex[:8]
    env = {
        **TEST_SETTINGS_ENV,
        "UOCR_ENGINE": args.engine,
        "UOCR_PAGE_GROUP_SIZE": "8",
        "UOCR_MAX_PAGES_PER_REQUEST": str(pages),
        "UOCR_MAX_UPLOAD_BYTES": str(max(len(pdf) * 2, 3 * 2**20)),
        "UOCR_LONG_DOCUMENT_PAGES": "300",
        "UOCR_WORKER__LEASE_SECONDS": "120",
        "UOCR_DATABASE__URL": create_database(admin, tag),
        "UOCR_REDIS__URL": os.environ["UOCR_TEST_REDIS_URL"] + "/13",
        "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
        "UOCR_S3__BUCKET": tag,
    }
    os.environ.update(env)
    settings = load_settings()
    S3ObjectStore(settings.s3).ensure_bucket()
    redis.Redis.from_url(settings.redis.url).flushdb()
    with transaction(make_session_factory(make_engine(settings.database))) as session:
        tenant = create_key(session, tenant_name="archive")
    logs = Path(tempfile.mkdtemp(prefix="uocr-long-bench-"))
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    ocr = celery_worker(env, logs, name="long@ocr", queues=",".join(OCR_QUEUES), beat=False)
    control_env = {**env, "UOCR_WORKER__PRELOAD_ENGINE": "false"}
    control = celery_worker(control_env, logs, name="long@control", queues="control", beat=True)
    processes = [api_server(env, logs, port, workers=2).start(), ocr.start(), control.start()]
    headers = {"Authorization": f"Bearer {tenant.api_key}"}
    try:
        wait_http(f"{api_url}/healthz")
        with httpx.Client(base_url=api_url, timeout=600, headers=headers) as client:
            started = time.perf_counter()
            answer = client.post("/v1/jobs", files={"file": ("book.pdf", pdf)})
            submit_s = time.perf_counter() - started
            assert answer.status_code in (201, 202), answer.text
            job_id = answer.json()["id"]
            assert ocr.popen is not None
            status = Sampler(ocr.popen.pid, client, f"/v1/jobs/{job_id}", args.poll_every)
            window = Sampler(None, client, f"/v1/jobs/{job_id}?pages=1-{WINDOW}", 1.0)
            for sampler in (status, window):
                sampler.start()
            console = console_grid(api_url, tenant.api_key, job_id, pages) if args.console else {}
            while client.get(f"/v1/jobs/{job_id}").json()["status"] not in TERMINAL:
                time.sleep(0.5)
            for sampler in (status, window):
                sampler.halt.set()
                sampler.join()
            done_s = time.perf_counter() - started
            job = client.get(f"/v1/jobs/{job_id}", params={"pages": "all"}).json()
            assert (job["status"], job["pages_done"]) == ("succeeded", pages), job["status"]
            last_page = max(p["finished_at"] for p in job["pages"])
            assembly_s = _seconds(job["finished_at"]) - _seconds(last_page)
            sizes = check_outputs(client, job_id, pages)
    finally:
        for process in processes:
            process.stop()
        drop_database(admin, tag)
    return {
        "pages": pages,
        "upload_mb": len(pdf) / 2**20,
        "submit_s": submit_s,
        "done_s": done_s,
        "assembly_s": assembly_s,
        "worker_peak_process_mb": status.peak_process,
        "worker_peak_tree_mb": status.peak_tree,
        "status_p50_ms": pct(status.latencies, 50),
        "status_p95_ms": pct(status.latencies, 95),
        "status_polls": len(status.latencies),
        "status_kb": statistics.median(status.sizes) / 1024,
        "window_p95_ms": pct(window.latencies, 95),
        "window_kb": statistics.median(window.sizes) / 1024,
        "output_kb": {fmt: size / 1024 for fmt, size in sizes.items()},
        "console": console,
    }


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pages", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--engine", default="simulated", choices=["simulated", "rapidocr"])
    parser.add_argument("--poll-every", type=float, default=0.5, help="seconds between polls")
    parser.add_argument("--no-console", dest="console", action="store_false")
    args = parser.parse_args()
    results = [run_length(n, book(n), args) for n in args.pages]
    print(f"engine={args.engine} cores={os.cpu_count()}")
    rows = [
        ("upload (MB)", "upload_mb"),
        ("submit (s)", "submit_s"),
        ("submit to done (s)", "done_s"),
        ("assembly (s)", "assembly_s"),
        ("worker peak, largest process (MB)", "worker_peak_process_mb"),
        ("worker peak, whole tree (MB)", "worker_peak_tree_mb"),
        ("status p50 (ms)", "status_p50_ms"),
        ("status p95 (ms)", "status_p95_ms"),
        ("status answer (KB)", "status_kb"),
        (f"status ?pages=1-{WINDOW} p95 (ms)", "window_p95_ms"),
        (f"status ?pages=1-{WINDOW} answer (KB)", "window_kb"),
    ]
    print(f"{'pages':<38}" + "".join(f"{r['pages']:>12}" for r in results) + f"{'ratio':>8}")
    for name, key in rows:
        values = [r[key] for r in results]
        ratio = values[-1] / values[0] if values[0] else float("nan")
        print(f"{name:<38}" + "".join(f"{v:>12.2f}" for v in values) + f"{ratio:>8.2f}")
    for fmt in FORMATS:
        values = [r["output_kb"][fmt] / r["pages"] for r in results]
        print(f"{'stored a page, ' + fmt + ' (KB)':<38}" + "".join(f"{v:>12.2f}" for v in values))
    for r in results:
        if r["console"]:
            print(f"console, {r['pages']} pages: {json.dumps(r['console'])}")
    print("every output held every page once and in order")
    harness.write({"engine": args.engine, "lengths": results}, args, harness.card())


if __name__ == "__main__":
    main()
