"""Would a prefill beside the decode steps pay? Prefill passes of page groups on a side CUDA
stream while sequences decode on the default one, against the same work one after the other.

At the goals' short outputs a 128-document run is a quarter prefill (bench/RESULTS.md, "GPU
engine: decode throughput"): the steps read K and V at the card's memory bandwidth while the
prefill's GEMMs are bound by its tensor cores, so the two might share the card. This measures
it, the engine as it is (full-size v1, random bf16 weights). On an H100 they do not: 1.03-1.07x
in every mode, the graphed pass's included (bench/RESULTS.md, "GPU engine: kernels"); a pass's
GEMMs hold every SM.

- ``steps``: ``--steps`` decode steps of ``--sequences`` sequences (8-page groups), alone;
- ``passes``: ``--passes`` prefill passes of ``--groups`` 8-page groups each, alone;
- ``one_thread``: the passes launched on the side stream, then the steps, from one thread
  (the decode loop's thread: the host launches a pass before it can launch a step);
- ``interleaved``: one pass, then its share of the steps, and so on, from one thread;
- ``two_threads_<µs>``: the passes from a second thread, at each Python switch interval
  (the GIL passes between the threads at least that often);
- ``graphed_*`` (GPU): one pass captured as a CUDA graph, so that its launches cost the host
  nothing: the passes replayed alone, then beside the steps, then beside steps on a stream of
  higher priority. What the card itself can overlap, whatever the host does.
- ``green<N>_*`` (GPU, ``--prefill-sms``): the passes on a stream of a CUDA green context of N
  SMs, so that their GEMMs cannot hold the whole card, the steps (graphs) on every SM:
  eager passes alone (``eager_passes``) and launched from a second thread beside the steps
  (``eager_thread``); a pass captured inside the green context, replayed alone and beside the
  steps (``own_graph_*``); eager passes in turn with the steps (``interleaved``). And, for the
  record, the pass captured outside it (``passes``, ``beside``, ``split``: the steps on a
  green stream of the other SMs): a graph captured on the primary context runs on every SM
  whatever stream replays it, so these show no confinement (bench/RESULTS.md, "GPU engine:
  kernels").

    python3 -m bench.engine.overlap_bench [--sequences 128] [--passes 4] [--steps 20]
    python3 -m bench.engine.overlap_bench --tiny --sequences 4 --groups 2 --steps 4   # CPU

Prints ms for each, and serial / overlapped (2.0: the card did both at once, 1.0: no gain).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch

from bench import harness
from bench.engine import setup
from bench.engine.setup import Engine, free_running_guard, stand_in
from bench.harness import sync
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import (
    DecodeRequest,
    NewSegment,
    free_segments,
)

PAGES = 8  # a page group


def group(engine: Engine, name: str, sequence: int, new_tokens: int) -> DecodeRequest:
    """An 8-page group's request: BOS, the pages' stand-in embeddings (the ``sequence``-th
    distinct list), the prompt."""
    text, device, dtype = engine.text, engine.device, engine.dtype
    new = [NewSegment("bos", engine.embed(torch.tensor([0], device=device)))]
    new += [
        NewSegment(
            "page",
            stand_in(setup.PAGE_TOKENS, text.hidden_size, device, dtype, seed),
            page_no=p,
        )
        for p, seed in enumerate(setup.distinct_pages(sequence, PAGES))
    ]
    new.append(
        NewSegment(
            "prompt",
            stand_in(setup.PROMPT_TOKENS, text.hidden_size, device, dtype, 7),
        )
    )
    return DecodeRequest(name, [], new, free_running_guard(PAGES), new_tokens, ignore_eos=True)


def start_decoding(engine: Engine, sequences: int, steps: int) -> None:
    """``sequences`` groups admitted and decoding, past their first steps, with room for
    ``steps`` more."""
    scheduler = engine.scheduler
    scheduler.max_concurrency = sequences
    for i in range(sequences):
        scheduler.submit(group(engine, f"s{i}", i, steps + 20))
    for _ in range(10):
        scheduler.step()
    sync(engine.device)


def prefill_passes(engine: Engine, passes: int, requests: list[DecodeRequest]) -> None:
    """``passes`` passes of these groups through the runner, as admission runs them (rows
    allocated in the workspace, prefilled, their first logits), each freed after its pass."""
    for _ in range(passes):
        admitted = [engine.scheduler._allocate(request) for request in requests]
        assert all(admitted), "the workspace is full: raise --workspace-gb"
        sequences = [s for s in admitted if s is not None]
        engine.runner.prefill_many(
            [
                (s, s.segments, [n.embeds for n in r.new])
                for s, r in zip(sequences, requests, strict=True)
            ]
        )
        for sequence in sequences:
            free_segments(engine.workspace, sequence.segments)
            engine.workspace.free(sequence.ring)


def decode_steps(engine: Engine, steps: int) -> None:
    for _ in range(steps):
        engine.scheduler.step()


@contextlib.contextmanager
def beside(stream: torch.cuda.Stream | None) -> Iterator[None]:
    """Work launched inside goes to ``stream`` once the default stream's queued work is done,
    and nothing on the default stream waits for it (the CPU has no streams)."""
    if stream is None:
        yield
        return
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        yield


def captured_pass(engine: Engine, requests: list[DecodeRequest], stream: torch.cuda.Stream) -> Any:
    """One pass captured as a CUDA graph on ``stream``, whose replay costs the host nothing:
    what the card alone makes of a pass beside the steps. The error's text, where a pass
    cannot be captured (a host sync in it)."""
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="relaxed"):
            prefill_passes(engine, 1, requests)
    except Exception as error:  # noqa: BLE001 (reported, not raised: the eager modes stand)
        return f"{type(error).__name__}: {error}"[:300]
    return graph


Work = Callable[[], None]


def in_order(*works: Work) -> Work:
    """One after the other, from this thread (each launches and returns)."""

    def run() -> None:
        for work in works:
            work()

    return run


def on(stream: torch.cuda.Stream | None, work: Work) -> Work:
    """``work`` launched on ``stream``, beside the default stream's (see ``beside``)."""

    def run() -> None:
        with beside(stream):
            work()

    return run


def from_a_thread(passes: Work, steps: Work) -> Work:
    """``passes`` launched from a second thread while this one launches ``steps``: the host's
    launches of a pass off the steps' way."""

    def run() -> None:
        thread = threading.Thread(target=passes)
        thread.start()
        steps()
        thread.join()

    return run


def replays(graph: Any, stream: torch.cuda.Stream, count: int) -> Work:
    """``graph`` replayed ``count`` times on ``stream``."""

    def run() -> None:
        for _ in range(count):
            graph.replay()

    return on(stream, run)


def in_turn(
    engine: Engine,
    args: argparse.Namespace,
    requests: list[DecodeRequest],
    stream: torch.cuda.Stream | None,
) -> Work:
    """One pass on ``stream``, then its share of the steps, and so on, as a loop would."""

    def run() -> None:
        share = max(1, args.steps // args.passes)
        for done in range(args.passes):
            with beside(stream):
                prefill_passes(engine, 1, requests)
            decode_steps(engine, share if done < args.passes - 1 else args.steps - done * share)

    return run


def main() -> None:
    parser = harness.parser(
        __doc__,
        tiny=False,
        groups=8,
        steps=20,
        workspace_gb=24.0,
        sr_swa_blocks=0,
        help={"groups": "8-page groups a prefill pass", "steps": "decode steps a run"},
    )
    parser.add_argument("--sequences", type=int, default=128)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--switch-us", type=int, nargs="+", default=[5000, 500, 100])
    parser.add_argument(
        "--prefill-sms", type=int, nargs="*", default=[], help="green contexts' SM counts"
    )
    args = parser.parse_args()
    model, device, dtype = setup.bench_model(args.tiny)
    options = SimpleNamespace(
        workspace_gb=args.workspace_gb,
        block_size=32,
        no_cuda_graphs=False,
        concurrency=args.sequences,
        group_size=PAGES,
    )
    engine = Engine(model, options, device, dtype, sr_swa_blocks=args.sr_swa_blocks)
    runs = 6 + len(args.switch_us) + 5 * len(args.prefill_sms)  # each: a warm-up, 3 repeats
    start_decoding(engine, args.sequences, 4 * runs * args.steps)
    side = torch.cuda.Stream() if device.type == "cuda" else None
    # made once (the service's vision thread makes them, apart from the loop)
    requests = [group(engine, f"p{g}", 1000 + g, 1) for g in range(args.groups)]

    def passes() -> None:
        prefill_passes(engine, args.passes, requests)

    def steps() -> None:
        decode_steps(engine, args.steps)

    one_thread = in_order(on(side, passes), steps)
    interleaved = in_turn(engine, args, requests, side)
    two_threads = from_a_thread(on(side, passes), steps)
    results: dict = {
        "device": harness.card(device),
        "args": vars(args) | {"out": str(args.out)},
        "steps_ms": harness.Stopwatch.ms_of(steps, device),
        "passes_ms": harness.Stopwatch.ms_of(passes, device),
        "one_thread_ms": harness.Stopwatch.ms_of(one_thread, device),
        "interleaved_ms": harness.Stopwatch.ms_of(interleaved, device),
    }
    default_interval = sys.getswitchinterval()
    for micros in args.switch_us:
        sys.setswitchinterval(micros / 1e6)
        results[f"two_threads_{micros}us_ms"] = harness.Stopwatch.ms_of(two_threads, device)
    sys.setswitchinterval(default_interval)
    if side is not None:
        graph = graphed(engine, args, side, requests, steps, results)
        for sms in args.prefill_sms:
            partitioned(engine, args, sms, graph, requests, steps, results)
    serial = results["steps_ms"] + results["passes_ms"]
    results["serial_ms"] = serial
    rule = f"SR-SWA ({args.sr_swa_blocks} blocks)" if args.sr_swa_blocks else "R-SWA"
    print(
        f"{results['device']}, {rule}: {args.steps} steps of {args.sequences} sequences "
        f"{results['steps_ms']:.1f} ms, {args.passes} passes of {args.groups} groups "
        f"{results['passes_ms']:.1f} ms, one after the other {serial:.1f} ms"
    )
    for key, value in results.items():
        alone = ("steps_ms", "serial_ms")
        if key.endswith("_ms") and key not in alone and not key.endswith("passes_ms"):
            baseline = serial
            replayed = results.get("graphed_passes_ms")  # absent where a pass will not capture
            if key.startswith(("graphed_beside", "green")) and replayed:
                baseline = results["steps_ms"] + replayed  # the card's best serial time
            print(f"  {key[:-3]:<24} {value:8.1f} ms   serial / this {baseline / value:.2f}")
    for key, value in results.items():
        if key.endswith("_error"):
            print(f"  {key[:-6]}: {value}")
    engine.scheduler.abort_all()
    harness.write(results, args, results["device"])


def graphed(
    engine: Engine,
    args: argparse.Namespace,
    side: torch.cuda.Stream,
    requests: list[DecodeRequest],
    steps: Work,
    results: dict,
) -> Any:
    """The passes replayed from a CUDA graph: alone, beside the steps, and beside steps on a
    stream of higher priority (the card then schedules the steps' programs first). Returns
    the graph, or None where a pass cannot be captured."""
    graph = captured_pass(engine, requests, side)
    if isinstance(graph, str):
        results["graphed_error"] = graph
        return None
    device, replayed = engine.device, replays(graph, side, args.passes)
    urgent = torch.cuda.Stream(priority=-1)
    results["graphed_passes_ms"] = harness.Stopwatch.ms_of(replayed, device)
    results["graphed_beside_ms"] = harness.Stopwatch.ms_of(in_order(replayed, steps), device)
    results["graphed_beside_urgent_ms"] = harness.Stopwatch.ms_of(
        in_order(replayed, on(urgent, steps)), device
    )
    return graph


def green_stream(device: torch.device, sms: int) -> tuple[Any, torch.cuda.Stream] | str:
    """A stream whose kernels run on ``sms`` of the card's SMs only (a CUDA green context,
    kept alive with it), or the error's text where this torch or driver has none."""
    try:
        from torch.cuda.green_contexts import GreenContext

        context: Any = GreenContext.create(num_sms=sms, device_id=device.index or 0)
        return context, context.Stream()
    except Exception as error:  # noqa: BLE001 (reported: the other modes stand)
        return f"{type(error).__name__}: {error}"[:300]


def partitioned(
    engine: Engine,
    args: argparse.Namespace,
    sms: int,
    graph: Any,
    requests: list[DecodeRequest],
    steps: Work,
    results: dict,
) -> None:
    """The passes confined to ``sms`` SMs, the steps free or on the other SMs; ``graph``, a
    pass captured on the primary context (None: none could be)."""
    device = engine.device
    total = torch.cuda.get_device_properties(device).multi_processor_count
    prefill = green_stream(device, sms)
    decode = green_stream(device, total - sms)
    for name, made in (("prefill", prefill), ("decode", decode)):
        if isinstance(made, str):
            results[f"green{sms}_{name}_error"] = made
    if isinstance(prefill, str):
        return
    context, stream = prefill
    eager = on(stream, lambda: prefill_passes(engine, args.passes, requests))
    context.set_context()  # captured inside the green context: does its replay stay there?
    try:
        own = captured_pass(engine, requests, stream)
    finally:
        context.pop_context()
    key = f"green{sms}"
    try:
        results[f"{key}_eager_passes_ms"] = harness.Stopwatch.ms_of(eager, device)
        results[f"{key}_eager_thread_ms"] = harness.Stopwatch.ms_of(
            from_a_thread(eager, steps), device
        )
        if isinstance(own, str):
            results[f"{key}_capture_error"] = own
        else:
            own_replays = replays(own, stream, args.passes)
            results[f"{key}_own_graph_passes_ms"] = harness.Stopwatch.ms_of(own_replays, device)
            results[f"{key}_own_graph_beside_ms"] = harness.Stopwatch.ms_of(
                in_order(own_replays, steps), device
            )
        if graph is not None:  # captured on the primary context
            replayed = replays(graph, stream, args.passes)
            results[f"{key}_passes_ms"] = harness.Stopwatch.ms_of(replayed, device)
            results[f"{key}_beside_ms"] = harness.Stopwatch.ms_of(in_order(replayed, steps), device)
            if not isinstance(decode, str):
                split = in_order(replayed, on(decode[1], steps))
                results[f"{key}_split_ms"] = harness.Stopwatch.ms_of(split, device)
        results[f"{key}_interleaved_ms"] = harness.Stopwatch.ms_of(
            in_turn(engine, args, requests, stream), device
        )
    except Exception as error:  # noqa: BLE001
        results[f"green{sms}_run_error"] = f"{type(error).__name__}: {error}"[:300]


if __name__ == "__main__":
    main()
