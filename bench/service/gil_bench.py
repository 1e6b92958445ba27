"""What the interpreter's GIL switch interval does to the decode loop of a busy GPU worker.

On the H200 the service decoded 1.56x slower per page than the bare engine (issue 13;
bench/RESULTS.md, "Service on GPU") while its GPU was never short of work: every stage that drives
the GPU from Python (vision, prefill, decode) slowed alike. In the worker, the decode loop thread
waits for the GPU with the GIL released and must take it back after each step, while up to 128
Celery task threads run Python (result assembly, S3 and database calls). CPython hands the GIL
over only after the holder has run for the switch interval (5 ms by default), so each step can
wait that long: longer than the step itself (1.4-10.7 ms).

This bench stands in for both sides on the CPU: a loop that "waits for the GPU" (GIL released)
for ``--step-ms`` then runs ``--python-us`` of Python (sampling, the page guard), beside task
threads that run, in turn, a page result's assembly in Python (``json``), the real searchable
PDF build in the thread (``pdf``, PyMuPDF holds the GIL) or the same build handed to a process
pool as the worker now does (``pdf-process``). It prints ms per step for each against the same
loop alone, and the task threads' work rate, side by side.

    python -m bench.service.gil_bench [--threads 0 4 16] [--intervals-ms 5 1 0.5 0.2] \
        [--torch-ops 0 45]

``--torch-ops``: the loop also makes that many small torch calls per step. Each lets go of
the GIL and waits to take it back behind every busy thread: the decode step's host side makes
~45 (bench/RESULTS.md, "Service on CPU"), so its cost under load is per call, not per step.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from bench import harness


def page_result(n: int) -> str:
    """A page's JSON as a task thread builds it: blocks of words with boxes, in Python."""
    blocks = [
        {
            "type": "text",
            "bbox": [i, i + 1, i + 200, i + 30],
            "words": [{"text": f"word{j}", "conf": 0.9} for j in range(12)],
        }
        for i in range(n)
    ]
    return json.dumps({"page": n, "blocks": blocks})


def searchable_pdf() -> bytes:
    """The searchable PDF of samples/sample.pdf (3 scanned pages) with a text layer."""
    from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
    from uocr_core.contracts import Block, PageResult

    data = SAMPLE.read_bytes()
    block = Block(label="text", bbox=(100, 100, 900, 140), text="Revenue grew in every quarter")
    results = [
        PageResult(page=n, status="succeeded", blocks=[block] * 20, width=1000, height=1400)
        for n in (1, 2, 3)
    ]
    sources = [SourcePage("sample.pdf", i) for i in range(3)]
    return build_searchable_pdf(lambda _key: data, sources, results)


SAMPLE = harness.ROOT / "samples" / "sample.pdf"
WORK: dict[str, Callable[[], object]] = {"json": lambda: page_result(40), "pdf": searchable_pdf}


def busy(stop: threading.Event, done: list[int], work: Callable[[], object]) -> None:
    count = 0
    while not stop.is_set():
        work()
        count += 1
    done.append(count)


def decode_loop(steps: int, step_s: float, python_s: float, torch_ops: int) -> float:
    """ms per step: a GIL-free wait (the GPU's step), ``torch_ops`` small torch calls (each
    lets go of the GIL and must take it back, as every op the step's host side launches does),
    then Python until python_s has passed."""
    import torch

    tensor = torch.zeros(4)
    with harness.Stopwatch() as watch:
        for _ in range(steps):
            time.sleep(step_s)  # releases the GIL, as waiting on a CUDA sync does
            for _ in range(torch_ops):
                tensor.add_(1)
            until = time.perf_counter() + python_s
            while time.perf_counter() < until:
                pass
    return watch.ms / steps


def run(
    threads: int,
    interval_s: float,
    work: Callable[[], object],
    args: argparse.Namespace,
    torch_ops: int = 0,
) -> tuple[float, float]:
    sys.setswitchinterval(interval_s)
    stop, done = threading.Event(), []  # type: ignore[var-annotated]
    workers = [threading.Thread(target=busy, args=(stop, done, work)) for _ in range(threads)]
    for worker in workers:
        worker.start()
    with harness.Stopwatch() as watch:
        ms = decode_loop(args.steps, args.step_ms / 1000, args.python_us / 1e6, torch_ops)
        stop.set()
        for worker in workers:
            worker.join()
    return ms, sum(done) / watch.seconds


def main() -> None:
    parser = harness.parser(
        __doc__, threads=[0, 4, 16], steps=300, help={"threads": "task threads beside the loop"}
    )
    parser.add_argument("--intervals-ms", type=float, nargs="+", default=[5.0, 1.0, 0.5, 0.2])
    parser.add_argument("--work", nargs="+", default=["json", "pdf", "pdf-process"])
    parser.add_argument("--step-ms", type=float, default=3.4)  # R-SWA, 16 sequences, H200
    parser.add_argument("--python-us", type=float, default=300)
    # The decode step's host side makes ~45 torch calls on the card (launches, copies, the
    # choice of tokens); each hands the GIL over and waits to get it back.
    parser.add_argument("--torch-ops", type=int, nargs="+", default=[0, 45])
    args = parser.parse_args()
    default = sys.getswitchinterval()
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    works = {**WORK, "pdf-process": lambda: pool.submit(searchable_pdf).result()}
    rows: list[dict[str, object]] = []
    header = ("work", "threads", "interval", "torch ops", "ms/step", "x alone", "work/s")
    print("{:>12} {:>7} {:>9} {:>9} {:>8} {:>8} {:>7}".format(*header))
    for ops in args.torch_ops:
        alone, _ = run(0, default, WORK["json"], args, ops)
        print(f"{'alone':>12} {0:>7} {'':>9} {ops:>9} {alone:>8.2f} {1:>8.2f}")
        rows.append({"work": "alone", "threads": 0, "torch_ops": ops, "ms_step": alone})
        for name in args.work:
            for threads in [t for t in args.threads if t]:
                for interval in args.intervals_ms:
                    ms, rate = run(threads, interval / 1000, works[name], args, ops)
                    print(
                        f"{name:>12} {threads:>7} {interval:>6} ms {ops:>9} {ms:>8.2f} "
                        f"{ms / alone:>8.2f} {rate:>7.0f}",
                        flush=True,
                    )
                    rows.append(
                        {
                            "work": name,
                            "threads": threads,
                            "interval_ms": interval,
                            "torch_ops": ops,
                            "ms_step": ms,
                            "over_alone": ms / alone,
                            "work_per_s": rate,
                        }
                    )
    pool.shutdown()
    sys.setswitchinterval(default)
    harness.write({"rows": rows}, args, harness.card())


if __name__ == "__main__":
    main()
