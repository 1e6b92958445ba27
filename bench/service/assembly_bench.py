"""A long document's assembly: the assembling worker's peak memory and time for documents of
several lengths (300 and 3,000 pages by default), every output written (JSON, Markdown, text,
JSON lines, hOCR, the searchable PDF), side by side with the shortest as the baseline.

Each document is a scanned PDF (a JPEG of its own on every page) with the simulated engine's
page results (700 tokens and 12 blocks a page) in a folder store; each assembly runs in a fresh
process, so its peak resident memory is the assembly's. Run:

    .venv/bin/python -m bench.service.assembly_bench --pages 300 3000
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pymupdf
from PIL import Image

from bench import harness
from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.simulated import SimulatedEngine
from ocr_worker.outputs import document, pages
from uocr_core import object_keys
from uocr_core.settings import SimulatedEngineSettings
from uocr_core.storage import LocalObjectStore

SOURCE_KEY = "jobs/bench/input/source.pdf"


def make_document(folder: Path, count: int) -> None:
    """The stored source and its page results, and the page rows as JSON (``rows.json``)."""
    store = LocalObjectStore(folder)
    out = pymupdf.open()
    rng = np.random.default_rng(0)
    for n in range(count):  # a scan of its own a page: noise JPEGs, ~25 KB each
        pixels = rng.integers(200, 255, (700, 500, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=40)
        page = out.new_page(width=595, height=842)
        page.insert_image(page.rect, stream=buffer.getvalue())
        page.insert_text((72, 72), f"page {n + 1}")
    store.put(SOURCE_KEY, out.tobytes(garbage=3, deflate=True))
    engine = SimulatedEngine(SimulatedEngineSettings(seconds_per_page=0, tokens_per_second=1e9))
    blank = np.zeros((8, 8, 3), np.uint8)
    rows = []
    for start in range(0, count, 64):
        numbers = range(start + 1, min(count, start + 64) + 1)
        images = [PageImage(n, blank, size=(1654, 2339)) for n in numbers]
        results = engine.run_group(PageGroupInput("bench", 0, [], images, True))
        keys = pages.write_pages(store, "bench", results)
        rows += [
            {"page_no": n, "result_key": keys[n], "status": "succeeded", "error": None}
            for n in numbers
        ]
    (folder / "rows.json").write_text(json.dumps(rows))


def assemble(folder: Path) -> dict[str, float]:
    """In this process: the document assembled; its peak memory and time."""
    store = LocalObjectStore(folder)
    rows = json.loads((folder / "rows.json").read_text())
    job = SimpleNamespace(
        id="bench",
        source_name="book.pdf",
        page_count=len(rows),
        pages_failed=0,
        pages_flagged=0,
        job_metadata={},
        model_version="default",
        engine="simulated",
        pages=[
            SimpleNamespace(**row, source_key=SOURCE_KEY, source_index=n)
            for n, row in enumerate(rows)
        ],
    )
    started = time.perf_counter()
    document.write_document(store, job, status="succeeded")  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    sizes = {
        fmt: store.size(object_keys.result_key("bench", fmt))
        for fmt in ("json", "markdown", "text", "jsonl", "hocr", "pdf")
    }
    peak_mb = _peak_resident_mb()
    return {"seconds": seconds, "peak_mb": peak_mb, "output_mb": sum(sizes.values()) / 2**20}


def _peak_resident_mb() -> float:
    """This process's own peak (VmHWM): ru_maxrss would start from the bench's own size, as
    Linux carries it across fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pages", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--assemble", type=Path, help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.assemble:  # the child: one assembly, its figures on stdout
        print(json.dumps(assemble(args.assemble)))
        return
    figures = {}
    for count in args.pages:
        with tempfile.TemporaryDirectory() as tmp:
            make_document(Path(tmp), count)
            child = subprocess.run(
                [sys.executable, "-m", "bench.service.assembly_bench", "--assemble", tmp],
                check=True,
                capture_output=True,
                text=True,
            )
            figures[count] = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{count} pages: {figures[count]}", flush=True)
    base = figures[args.pages[0]]
    print(f"{'pages':>6} {'peak MB':>8} {'x base':>7} {'s':>7} {'ms/page':>8} {'output MB':>10}")
    for count, f in figures.items():
        print(
            f"{count:>6} {f['peak_mb']:>8.0f} {f['peak_mb'] / base['peak_mb']:>7.2f} "
            f"{f['seconds']:>7.1f} {1000 * f['seconds'] / count:>8.2f} {f['output_mb']:>10.1f}"
        )
    harness.write({str(k): v for k, v in figures.items()}, args, harness.card())


if __name__ == "__main__":
    main()
