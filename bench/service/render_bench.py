"""What drawing pages at the GPU engine's size saves the render processes, side by side.

The worker draws PDF pages at ``render_dpi`` (200); the GPU engine reads 1024 pixels a side of
each page of a group and shrank everything else on the card. This renders the same generated
scans both ways in a pool of processes, as the worker's render pool does, and prints pages/s,
CPU ms per page and the bytes each page sends back to the task.

    python -m bench.service.render_bench --pages 48 --processes 2
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench import harness
from ocr_worker.imaging import PageRasterizer
from tests.factories import sample_pages, scanned_pdf
from uocr_core.storage import LocalObjectStore

_RASTERIZER: list[PageRasterizer] = []


def _start(folder: str, dpi: int) -> None:
    _RASTERIZER.append(PageRasterizer(LocalObjectStore(Path(folder)), dpi=dpi, max_side=4000))


def _draw(args: tuple[int, int | None]) -> tuple[float, int]:
    index, long_side = args
    started = time.process_time()
    page = _RASTERIZER[0].render_page("scan.pdf", index, long_side)
    return time.process_time() - started, page.pixels.nbytes


def run(folder: str, pages: int, processes: int, dpi: int, long_side: int | None) -> dict:  # type: ignore[type-arg]
    with ProcessPoolExecutor(processes, initializer=_start, initargs=(folder, dpi)) as pool:
        list(pool.map(_draw, [(i % pages, long_side) for i in range(processes)]))  # warm-up
        with harness.Stopwatch() as watch:
            done = list(pool.map(_draw, [(i, long_side) for i in range(pages)]))
    return {
        "pages_per_s": pages / watch.seconds,
        "cpu_ms_per_page": 1000 * sum(cpu for cpu, _ in done) / pages,
        "mb_per_page": sum(size for _, size in done) / pages / 1e6,
    }


def main() -> None:
    parser = harness.parser(
        __doc__, pages=48, processes=2, dpi=200, long_side=1024, help={"pages": "pages drawn"}
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pdf = scanned_pdf(sample_pages(args.pages, lines=12, seed=5), seed=5)
        LocalObjectStore(Path(folder)).put("scan.pdf", pdf)
        full = run(folder, args.pages, args.processes, args.dpi, None)
        small = run(folder, args.pages, args.processes, args.dpi, args.long_side)
    print(f"{args.pages} scanned A4 pages, {args.processes} render processes")
    print(f"{'':<22}{f'{args.dpi} dpi':>14}{f'{args.long_side} a side':>14}{'ratio':>10}")
    for key, label in (
        ("pages_per_s", "pages/s"),
        ("cpu_ms_per_page", "CPU ms per page"),
        ("mb_per_page", "MB per page"),
    ):
        print(f"{label:<22}{full[key]:>14.1f}{small[key]:>14.1f}{small[key] / full[key]:>10.2f}")
    harness.write(
        {f"{args.dpi}_dpi": full, f"{args.long_side}_a_side": small}, args, harness.card()
    )


if __name__ == "__main__":
    main()
