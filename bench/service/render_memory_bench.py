"""The render processes' memory, with nothing in flight, after each round of the same documents.

A GPU worker's render processes (``worker.render_processes``) draw every page of every group. A
GPU run on 2026-12-05 read the worker with its children 10% larger, idle, after a 64-document
run than after its 16-document warm-up (bench/RESULTS.md, "Service on GPU"). This draws the same
generated scans through a real ``ProcessRasterizer`` (pages fetched from the S3 server, 8-page
groups from as many threads as processes, 1024 pixels a side as the GPU engine asks) round after
round, and prints the processes' RSS after each: a working set levels off from the second round,
a leak does not.

    bash .ci/services start    # or any S3 server: UOCR_S3__ENDPOINT_URL
    export UOCR_S3__ENDPOINT_URL=http://127.0.0.1:59000
    .venv/bin/python -m bench.service.render_memory_bench --documents 16 --pages 20 \
        --processes 4 --rounds 4
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor

import psutil

from bench import harness
from ocr_worker.imaging import PageRenderError, ProcessRasterizer
from tests.factories import sample_pages, scanned_pdf
from uocr_core.settings import get_settings
from uocr_core.storage import S3ObjectStore

GROUP = 8


def children_rss() -> int:
    total = 0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # recycled between listing and reading
            total += child.memory_info().rss
    return total


def main() -> None:
    parser = harness.parser(__doc__, documents=16, pages=20, processes=4, rounds=4, long_side=1024)
    args = parser.parse_args()
    settings = get_settings()
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    keys = []
    for d in range(args.documents):
        key = f"bench/render-memory/{d}.pdf"
        store.put(key, scanned_pdf(sample_pages(args.pages, seed=d), seed=d))
        keys.append(key)
    groups = [
        [(key, i) for i in range(start, min(start + GROUP, args.pages))]
        for key in keys
        for start in range(0, args.pages, GROUP)
    ]
    w = settings.worker
    pool = ProcessRasterizer(
        settings.s3, dpi=w.render_dpi, max_side=w.max_render_side, processes=args.processes
    )

    def draw(group: list[tuple[str, int]]) -> int:
        pages = pool.render_many(group, args.long_side)
        assert not [p for p in pages if isinstance(p, PageRenderError)], pages
        return len(pages)

    # Spawned processes start on demand: as many calls at once as processes start them all.
    list(pool.pool.map(time.sleep, [0.5] * args.processes))
    readings = [children_rss()]
    print(f"render processes: {args.processes}, idle before any page: {readings[0] / 1e6:.0f} MB")
    with ThreadPoolExecutor(args.processes) as threads:
        for n in range(1, args.rounds + 1):
            pages = sum(threads.map(draw, groups))
            readings.append(children_rss())
            growth = readings[-1] / readings[-2] - 1
            print(
                f"round {n}: {pages} pages, idle after: {readings[-1] / 1e6:.0f} MB "
                f"({growth:+.2%} on the round before)",
                flush=True,
            )
    pool.pool.shutdown()
    figures = {
        "processes": args.processes,
        "rss_mb_idle_before_and_after_rounds": [round(r / 1e6, 1) for r in readings],
    }
    harness.write(figures, args, harness.card())


if __name__ == "__main__":
    main()
