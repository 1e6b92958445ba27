"""A long-lived worker's memory over many documents, side by side with bare RapidOCR's.

Each path runs in a process of its own, OCRing the same documents one after another:

- bare: PyMuPDF renders each page and RapidOCR reads it, as a script would (the baseline);
- worker: one PageGroupPipeline kept for the whole run, as a Celery worker child keeps it:
  submit, render, OCR, store each page, assemble the result (JSON, Markdown, searchable PDF),
  on SQLite and a folder store, jobs accumulating in the database.

Resident memory is sampled after every document. Printed: RSS after the warm-up documents and
after the last, and the growth per document in between, for both, with the ratio.

    .venv/bin/python -m bench.service.soak_bench --documents 40 --pages 2
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pymupdf

from bench import harness
from ocr_worker.embedded import InlineDispatcher
from ocr_worker.engines.base import PageImage
from ocr_worker.engines.rapidocr import RapidOcrEngine
from ocr_worker.pipeline import PageGroupPipeline
from tests.factories import sample_pages, scanned_pdf
from uocr_core import audit
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.jobs.service import JobOptions, UploadedFile, submit_job
from uocr_core.migrate import upgrade
from uocr_core.settings import load_settings
from uocr_core.storage import LocalObjectStore
from uocr_core.tenants import create_key

MB = 1024 * 1024
DISTINCT_DOCUMENTS = 4  # cycled, so no cache can answer from the last identical input


def documents(pages: int) -> list[bytes]:
    return [
        scanned_pdf(sample_pages(pages, lines=6, seed=seed), seed=seed)
        for seed in range(DISTINCT_DOCUMENTS)
    ]


def rss_mb() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / MB


def soak_bare(folder: Path, docs: list[bytes], rounds: int, dpi: int) -> list[float]:
    """PyMuPDF and RapidOCR as a script uses them: open, render, OCR, close."""
    engine = RapidOcrEngine(threads=2)
    samples = []
    for n in range(rounds):
        with pymupdf.open(stream=docs[n % len(docs)], filetype="pdf") as doc:
            for page in doc:
                pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
                pixels = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3)
                engine.recognize_page(PageImage(page.number + 1, pixels.copy()))
        samples.append(rss_mb())
    return samples


def soak_worker(folder: Path, docs: list[bytes], rounds: int, dpi: int) -> list[float]:
    url = f"sqlite:///{folder / 'state.db'}"
    upgrade(url)
    settings = load_settings(
        database={"url": url},
        s3={"local_root": folder / "objects"},
        worker={"render_dpi": dpi, "render_processes": 0},
        queue_max_size=1_000_000,
    )
    sessions = make_session_factory(make_engine(settings.database))
    store = LocalObjectStore(folder / "objects")
    dispatcher = InlineDispatcher()
    with transaction(sessions) as session:
        tenant_id = create_key(session, tenant_name="soak").tenant_id
    pipeline = PageGroupPipeline(
        sessions=sessions,
        store=store,
        engine=RapidOcrEngine(threads=2),
        dispatcher=dispatcher,
        settings=settings,
        worker_id="soak",
    )
    samples = []
    for n in range(rounds):
        submit_job(
            sessions=sessions,
            store=store,
            dispatcher=dispatcher,
            settings=settings,
            tenant_id=tenant_id,
            files=[UploadedFile(f"doc{n}.pdf", docs[n % len(docs)])],
            options=JobOptions(),
            actor=audit.OPERATOR,
        )
        while dispatcher.groups:
            pipeline.run(*dispatcher.groups.popleft())
        samples.append(rss_mb())
    return samples


def child(path: str, rounds: int, pages: int, dpi: int) -> None:
    docs = documents(pages)
    soak = soak_bare if path == "bare" else soak_worker
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(soak(Path(folder), docs, rounds, dpi)))


def run_child(path: str, args: argparse.Namespace) -> list[float]:
    argv = [sys.executable, "-m", "bench.service.soak_bench", "--child", path]
    argv += ["--documents", str(args.documents), "--pages", str(args.pages), "--dpi", str(args.dpi)]
    done = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
    samples: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return samples


def report(args: argparse.Namespace, results: dict[str, list[float]]) -> dict[str, float]:
    warm = args.warmup
    later = args.documents - warm
    print(f"documents={args.documents} pages each={args.pages} dpi={args.dpi} warm-up={warm}")
    print(f"{'path':8} {'RSS warm (MB)':>14} {'RSS last (MB)':>14} {'growth/doc (KB)':>16}")
    growth = {}
    for path, samples in results.items():
        growth[path] = (samples[-1] - samples[warm - 1]) * 1024 / later
        print(f"{path:8} {samples[warm - 1]:14.1f} {samples[-1]:14.1f} {growth[path]:16.1f}")
    bare, worker = results["bare"], results["worker"]
    print(f"RSS ratio worker / bare, last document: {worker[-1] / bare[-1]:.3f}")
    ratio = growth["worker"] / growth["bare"] if growth["bare"] else float("nan")
    print(f"growth per document, worker / bare: {ratio:.3f}")
    return {f"{path}_growth_kb_per_document": value for path, value in growth.items()}


def main() -> None:
    parser = harness.parser(
        __doc__,
        documents=40,
        pages=2,
        dpi=120,
        warmup=5,
        help={
            "documents": "documents one after another, each path",
            "warmup": "documents before the first that counts",
        },
    )
    parser.add_argument("--child", choices=("bare", "worker"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.documents, args.pages, args.dpi)
        return
    if args.documents <= args.warmup:
        parser.error("--documents must be more than --warmup")
    results = {path: run_child(path, args) for path in ("bare", "worker")}
    growth = report(args, results)
    harness.write({"rss_mb": results, **growth}, args, harness.card())


if __name__ == "__main__":
    main()
