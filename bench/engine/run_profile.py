"""Where a run of documents loses time against the steady step: the GPU's work and its idle
gaps over a window of steps, in the steady step and inside runs of documents.

engine_bench's runs take longer a step than its steady step (an H100 on 2026-12-06: 16
documents, 2.84 ms a step with short outputs and 2.62 at 700 tokens a page, against 2.42 steady;
128, 8.49 against 8.15; bench/RESULTS.md, "GPU engine: kernels"). Either the GPU does more a
step in a run, or it waits on the host. Each case is profiled over a window of ``--window``
steps (torch's profiler, CUDA activity; the window is set by the steps the scheduler launches):
the window's wall ms a step, the GPU's busy ms a step (the union of its kernels and copies), its
idle time by the gaps' length, the kernel families. Runs at 700 tokens a page only for the first
document count (their groups are long).

    python3 -m bench.engine.run_profile --documents 16 128                        # on the GPU
    python3 -m bench.engine.run_profile --tiny --documents 2 --window 20 --skip 5 --pages 9  # CPU
        (a smoke run: on the CPU no GPU activity is counted)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from bench import harness
from bench.engine import setup
from bench.engine.setup import Engine
from bench.engine.step_profile import kernel_table
from bench.harness import sync

GAP_BUCKETS_US = (10, 100, 1000)  # idle gaps shorter than each, then the rest


def busy_and_gaps(prof: Any) -> tuple[float, dict[str, float]]:
    """The GPU's busy µs (the union of its activity) and its idle µs by gap length."""
    spans = sorted(
        (event.time_range.start, event.time_range.end)
        for event in prof.events()
        if event.device_type == torch.autograd.DeviceType.CUDA
    )
    busy, gaps = 0.0, {f"< {b} us": 0.0 for b in GAP_BUCKETS_US} | {"longer": 0.0}
    end = None
    for start, stop in spans:
        if end is not None and start > end:
            gap = start - end
            label = next((f"< {b} us" for b in GAP_BUCKETS_US if gap < b), "longer")
            gaps[label] += gap
        if end is None or start > end:
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return busy, gaps


def profiled(engine: Engine, skip: int, window: int, work: Callable[[], Any]) -> dict[str, Any]:
    """Run ``work`` with the window's ``window`` steps after the first ``skip`` profiled."""
    runner = engine.runner
    marks: dict[int, float] = {}  # decode call -> perf_counter at its start
    seen: dict[str, Any] = {}
    steps = 0
    decode = runner.decode

    def window_ended(prof: Any) -> None:  # the window's events, before the profiler drops them
        seen["busy"], seen["gaps"] = busy_and_gaps(prof)
        seen["table"] = kernel_table(prof, window)

    # Decode call k runs in the profiler's step k + 1 (prof.step() just before it): the active
    # steps skip + 1 .. skip + window are decode calls skip .. skip + window - 1, with the host's
    # work after each (reading tokens, the guard, admitting).
    with profile(
        activities=[
            ProfilerActivity.CUDA if engine.device.type == "cuda" else ProfilerActivity.CPU
        ],
        schedule=schedule(wait=skip, warmup=1, active=window, repeat=1),
        on_trace_ready=window_ended,
    ) as prof:

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal steps
            if steps in (skip, skip + window):
                sync(engine.device)
                marks[steps] = time.perf_counter()
            steps += 1
            prof.step()
            return decode(*args, **kwargs)

        runner.decode = counted  # type: ignore[method-assign]
        try:
            work()
        finally:
            del runner.decode  # the class's method again
    if len(marks) < 2 or not seen:
        raise SystemExit(f"the work ran {steps} steps, fewer than --skip + --window + 1")
    busy, gaps, table = seen["busy"], seen["gaps"], seen["table"]
    return {
        "wall_ms_per_step": (marks[skip + window] - marks[skip]) * 1000 / window,
        "busy_ms_per_step": busy / 1000 / window,
        "idle_ms_per_step": {k: v / 1000 / window for k, v in gaps.items()},
        "families": table["families"],
        "top": table["top"],
        "kernels_per_step": table["kernels_per_step"],
    }


def cases(engine: Engine, args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], Any]]]:
    """Per document count: the steady step, a run of short outputs, and (the first count
    only) a run at --realistic-page-tokens; each count's graphs warmed by a run first."""
    realistic = args.realistic_page_tokens * args.group_size
    for n in args.documents:
        engine.scheduler.max_concurrency = max(args.concurrency, n)
        engine.run(n, args.pages, args.group_tokens)  # warm-up: every batch size's graph
        yield f"steady_{n}", partial(engine.step_ms, n, args.group_size, args.skip + args.window)
        yield f"documents_{n}", partial(engine.run, n, args.pages, args.group_tokens)
        if n == args.documents[0] and args.realistic_page_tokens:
            yield f"realistic_{n}", partial(engine.run, n, args.realistic_pages, realistic)


def main() -> None:
    parser = harness.parser(
        __doc__,
        documents=[16],
        pages=24,
        help={
            "documents": "documents decoding at once",
            "pages": "pages a document, short outputs",
        },
    )
    setup.engine_options(parser, workspace_gb=24.0)
    parser.add_argument("--realistic-page-tokens", type=int, default=700)
    parser.add_argument("--realistic-pages", type=int, default=8)
    parser.add_argument("--skip", type=int, default=300, help="steps before the window")
    parser.add_argument("--window", type=int, default=300)
    args = parser.parse_args()
    if args.window < 1:
        parser.error("--window must be at least 1 step")
    model, device, dtype = setup.bench_model(args.tiny)
    engine = Engine(model, args, device, dtype, 0)
    results: dict[str, Any] = {"device": harness.card(device)}
    for name, work in cases(engine, args):
        results[name] = row = profiled(engine, args.skip, args.window, work)
        idle = ", ".join(f"{k} {v:.3f}" for k, v in row["idle_ms_per_step"].items())
        print(
            f"{name:<16} wall {row['wall_ms_per_step']:.3f} ms a step, GPU busy "
            f"{row['busy_ms_per_step']:.3f}, {row['kernels_per_step']:.0f} kernels; idle: {idle}",
            flush=True,
        )
        for family, cell in list(row["families"].items())[:6]:
            print(f"    {family:<34}{cell['count']:6.1f} kernels {cell['us'] / 1000:8.3f} ms")
        # after every case: a later one that runs too few steps keeps these
        harness.write(results, args, results["device"], quiet=True)
    print(f"results: {harness.result_path(args.out, results['device'], args.label)}")


if __name__ == "__main__":
    main()
