"""Where the GPU engine's time goes: one decode step and one vision turn, kernel by kernel.

Full-size v1 with random bf16 weights (as engine_bench). For each batch size the decode step
runs as the service runs it (CUDA graphs, the scheduler's sampling) under torch's profiler;
the table gives wall ms per step, the GPU's busy ms per step, kernels per step, and the kernel
families that take the time. The vision tower is timed on A4 pages at 200 dpi: the
preprocessing per page (upload and resize on the device, as the engine does it), then the
tower per page at several batch sizes.

    python -m bench.engine.step_profile                                           # on the GPU
    python -m bench.engine.step_profile --tiny --batches 1 4 --vision-batches 1 2   # CPU, ~25 s
"""

from __future__ import annotations

import re
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from bench import harness
from bench.engine.setup import Engine, build_model
from bench.harness import Stopwatch, sync
from ocr_worker.engines.unlimited_ocr.model.preprocess import page_tensor
from ocr_worker.engines.unlimited_ocr.model.sam_attention import use_fused_rel_pos
from ocr_worker.engines.unlimited_ocr.step import fused_mlp, fused_step

FAMILIES = (  # first match wins; names as cuBLAS, cuDNN, CUTLASS, Triton and ATen spell them
    ("mlp kernels (ours)", r"^_(route_rows|router_logits|top_k|gate_up|down|combine)$"),
    ("step inputs, token choice (ours)", r"^_(step_inputs|slice_best|row_choice)$"),
    ("grouped gemm (experts)", r"grouped|group_gemm"),
    ("gemm", r"gemm|cutlass|xmma|nvjet|matmul|gemv|cublas"),
    ("attention", r"fmha|flash|attention|attn"),
    ("gather / scatter", r"index|gather|scatter"),
    ("sort / top-k", r"sort|topk|radix|histc|histogram|cumsum|scan"),
    ("reduce / norm", r"reduce|norm|softmax|mean|sum"),
    ("copy / cast", r"copy|cast|convert|fill"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton_poi"),
)


def family(name: str) -> str:
    lowered = name.lower()
    for label, pattern in FAMILIES:
        if re.search(pattern, lowered):
            return label
    return "other"


def kernel_table(prof, steps: int) -> dict:  # type: ignore[no-untyped-def]
    """Kernels per step: count and µs, by family and the top names."""
    by_family: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time
        for table, key in ((by_family, family(event.name)), (by_name, event.name[:90])):
            table[key][0] += 1
            table[key][1] += us
    per_step = lambda t: {k: {"count": v[0] / steps, "us": v[1] / steps} for k, v in t.items()}  # noqa: E731
    names = sorted(per_step(by_name).items(), key=lambda kv: -kv[1]["us"])
    return {
        "families": dict(sorted(per_step(by_family).items(), key=lambda kv: -kv[1]["us"])),
        "top": dict(names[:20]),
        "kernels_per_step": sum(v[0] for v in by_family.values()) / steps,
        "gpu_us_per_step": sum(v[1] for v in by_family.values()) / steps,
    }


def decode_profile(model, batch: int, args, device, dtype) -> dict:  # type: ignore[no-untyped-def]
    options = SimpleNamespace(
        workspace_gb=args.workspace_gb,
        block_size=32,
        concurrency=batch,
        group_size=args.pages,
        no_cuda_graphs=args.no_cuda_graphs,
    )
    engine = Engine(model, options, device, dtype, 0)
    wall_ms = engine.step_ms(batch, args.pages, args.steps)  # admits, warms, times, aborts
    # The same again under the profiler (a second admission; graphs are already captured).
    engine.step_ms(batch, args.pages, 3)
    scheduler = engine.scheduler
    from bench.engine.setup import distinct_pages, free_running_guard, stand_in
    from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, NewSegment

    hidden = model.config.text_config.hidden_size
    for i in range(batch):
        new = [NewSegment("bos", engine.embed(torch.tensor([0], device=device)))]
        new += [
            NewSegment("page", stand_in(273, hidden, device, dtype, seed), page_no=p)
            for p, seed in enumerate(distinct_pages(i, args.pages))
        ]
        scheduler.submit(
            DecodeRequest(f"p{i}", [], new, free_running_guard(args.pages), 500, ignore_eos=True)
        )
    for _ in range(5):
        scheduler.step()
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    steps = 10
    with profile(activities=activities) as prof:
        for _ in range(steps):
            scheduler.step()
        sync(device)
    scheduler.abort_all()
    table = kernel_table(prof, steps)
    return {"wall_ms_per_step": wall_ms, "replay_ms_per_step": replay_ms(engine, batch), **table}


def replay_ms(engine, batch: int) -> float | None:  # type: ignore[no-untyped-def]
    """The step's graph replayed back to back, no host work between: a step's time on the GPU
    with the gaps between its kernels. wall - replay is what the host adds; replay - busy is
    what the kernels' launches and tails add inside the graph."""
    graphs = engine.runner.graphs
    captured = [
        e for (count, _), e in (graphs.captured if graphs else {}).items() if count == batch
    ]
    if not captured:
        return None
    return harness.graphed_us(graph=captured[-1].graph, rounds=50) / 1000  # type: ignore[no-any-return]


def prefill_profile(model, args, device, dtype) -> dict:  # type: ignore[no-untyped-def]
    """One group's prefill (BOS + pages + prompt), as the scheduler admits a group: every
    running sequence waits for it. Also three groups in one pass, as the engine's scheduler
    admits the groups that arrive together (up to prefill_max_rows)."""
    from bench.engine.setup import free_running_guard, stand_in
    from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, NewSegment

    options = SimpleNamespace(
        workspace_gb=4.0,
        block_size=32,
        concurrency=max(3, args.pass_groups),
        group_size=args.pages,
        no_cuda_graphs=True,
    )
    engine = Engine(model, options, device, dtype, 0)
    hidden = model.config.text_config.hidden_size

    def admit(seed: int, groups: int = 1) -> None:
        for group in range(groups):
            first = seed + 50 * group  # each page its own stand-in
            new = [NewSegment("bos", engine.embed(torch.tensor([0], device=device)))]
            new += [
                NewSegment("page", stand_in(273, hidden, device, dtype, first + p), page_no=p)
                for p in range(args.pages)
            ]
            guard = free_running_guard(args.pages)
            request = DecodeRequest(f"f{seed}.{group}", [], new, guard, 4, ignore_eos=True)
            engine.scheduler.submit(request)
        engine.scheduler.step()  # admission: the prefill in one pass, then one decode step
        engine.scheduler.abort_all()

    result: dict = {"tokens": 273 * args.pages + 1}
    fused = engine.runner.fused
    # The MoE each way a prefill can run it (fused_step.PREFILL_MOES): transformers' module,
    # torch's grouped GEMM with our routing and sum, our kernels.
    for moe in fused_step.PREFILL_MOES if fused is not None else ("module",):
        if fused is not None:
            fused.prefill_moe = moe
        suffix = "" if moe == "module" else f"_moe_{moe}"
        admit(0)  # warm-up
        with Stopwatch(device) as watch:
            for seed in range(1, 4):
                admit(seed * 100)
        result[f"ms{suffix}"] = watch.seconds * 333
        admit(400, groups=3)  # warm-up: a pass of three is a shape of its own
        with Stopwatch(device) as watch:
            admit(500, groups=3)
        result[f"ms_in_pass_of_3{suffix}"] = watch.seconds * 333
        # a kernel that failed would have left the torch ops timed under this name
        assert engine.runner.fused is fused, "the fused step fell back to torch's ops"
        alone, in_pass = result[f"ms{suffix}"], result[f"ms_in_pass_of_3{suffix}"]
        print(
            f"prefill, MoE {moe}: {alone:.1f} ms a group, {in_pass:.1f} in a pass of 3", flush=True
        )
        if device.type == "cuda":
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                admit(999)
                sync(device)
            result[f"kernels{suffix}"] = kernel_table(prof, 1)
    if fused is not None:
        fused.prefill_moe = fused_step.PREFILL_MOE
    if device.type == "cuda" and args.pass_groups:
        # A full pass, as a backlog's groups are admitted: its kernels per group.
        def pass_kernels(seed: int) -> dict:  # type: ignore[type-arg]
            admit(seed, groups=args.pass_groups)  # warm-up: a shape of its own
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                admit(seed + 1000, groups=args.pass_groups)
                sync(device)
            return kernel_table(prof, args.pass_groups)

        result["kernels_pass"] = ours = pass_kernels(2000)
        if fused is not None:  # and with the last layer through every row, as before
            fused.whole_last_layer = True
            try:
                result["kernels_pass_whole_last_layer"] = whole = pass_kernels(4000)
            finally:
                fused.whole_last_layer = False
            mine, theirs = ours["gpu_us_per_step"], whole["gpu_us_per_step"]
            print(
                f"a pass's GPU work a group: {mine:.0f} us, last layer through every row "
                f"{theirs:.0f} ({theirs / mine:.3f}x)",
                flush=True,
            )
    return result


def tower_ms(model, pixels: torch.Tensor) -> float:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        model.model.get_image_features(pixel_values=pixels)  # warm-up
        with Stopwatch(pixels.device) as watch:
            for _ in range(3):
                model.model.get_image_features(pixel_values=pixels)
    return watch.ms / 3 / pixels.shape[0]


def vision_profile(model, args, device) -> dict:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    page = rng.integers(0, 256, size=(2339, 1654, 3), dtype=np.uint8)  # A4 at 200 dpi
    size = model.config.vision_config.sam_config.image_size
    page_tensor(page, size, device)  # warm-up
    with Stopwatch(device) as watch:
        tensors = [page_tensor(page, size, device) for _ in range(4)]
    result: dict = {"preprocess_ms_per_page": watch.seconds * 250}
    for batch in args.vision_batches:
        pixels = torch.stack([tensors[i % 4] for i in range(batch)]).to(device, model.dtype)
        if batch == args.vision_batches[-1]:  # transformers' SAM attention, then ours
            result[f"tower_ms_per_page_batch_{batch}_transformers"] = tower_ms(model, pixels)
            use_fused_rel_pos(model)
        result[f"tower_ms_per_page_batch_{batch}"] = ms = tower_ms(model, pixels)
        print(f"vision batch {batch}: {ms:.1f} ms per page", flush=True)
        if f"tower_ms_per_page_batch_{batch}_transformers" in result:
            before = result[f"tower_ms_per_page_batch_{batch}_transformers"]
            print(f"  (transformers' SAM attention: {before:.1f} ms per page)", flush=True)
        if batch == args.vision_batches[-1] and device.type == "cuda":
            with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
                model.model.get_image_features(pixel_values=pixels)
                sync(device)
            result["tower_kernels"] = kernel_table(prof, batch)  # per page
    return result


def main() -> None:
    parser = harness.parser(
        __doc__,
        tiny=False,
        batches=[1, 16, 128],
        pages=8,
        steps=50,
        workspace_gb=None,
        no_cuda_graphs=False,
        help={
            "pages": "pages a page group",
            "workspace_gb": "the decode steps' workspace, GB (default: 24, --tiny 0.05)",
        },
    )
    parser.add_argument("--vision-batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--skip-vision", action="store_true")
    parser.add_argument("--moe-merge", choices=fused_mlp.MOE_MERGES)
    parser.add_argument(
        "--pass-groups", type=int, default=7, help="groups in the profiled prefill pass (0: none)"
    )
    args = parser.parse_args()
    if args.workspace_gb is None:  # the tiny model's workspace on the CPU, not a card's 24 GB
        args.workspace_gb = 0.05 if args.tiny else 24.0
    if args.moe_merge:  # where the MoE's shared experts run (fused_mlp.MOE_MERGE)
        fused_mlp.MOE_MERGE = args.moe_merge
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = build_model(args.tiny, device, dtype)
    results: dict = {"device": harness.card(device)}
    results["moe_merge"] = fused_mlp.MOE_MERGE or "by token count"
    for batch in args.batches:
        results[f"decode_{batch}"] = row = decode_profile(model, batch, args, device, dtype)
        print(
            f"\ndecode step, {batch} sequences: {row['wall_ms_per_step']:.2f} ms wall, "
            f"{row['replay_ms_per_step'] or float('nan'):.2f} ms its graph replayed alone, "
            f"{row['gpu_us_per_step'] / 1000:.2f} ms GPU busy, "
            f"{row['kernels_per_step']:.0f} kernels",
            flush=True,
        )
        for name, cell in row["families"].items():
            print(f"  {name:<26}{cell['count']:>8.0f} kernels {cell['us'] / 1000:>8.3f} ms")
        for name, cell in list(row["top"].items())[:8]:
            print(f"    {cell['us']:>9.0f} us {cell['count']:>5.0f}x  {name}")
    results["prefill"] = pre = prefill_profile(model, args, device, dtype)
    print(f"\nprefill of one {args.pages}-page group ({pre['tokens']} tokens): {pre['ms']:.1f} ms")
    for moe in fused_step.PREFILL_MOES:
        table = pre.get("kernels" + ("" if moe == "module" else f"_moe_{moe}"))
        if table:
            print(f"  MoE {moe}: {table['gpu_us_per_step'] / 1000:.2f} ms GPU busy")
            for name, cell in table["families"].items():
                print(f"  {name:<26}{cell['count']:>8.0f} kernels {cell['us'] / 1000:>8.3f} ms")
    if "kernels_pass" in pre:
        table = pre["kernels_pass"]
        print(
            f"  a pass of {args.pass_groups} groups, MoE {fused_step.PREFILL_MOE}: "
            f"{table['gpu_us_per_step'] / 1000:.2f} ms GPU busy a group"
        )
        for name, cell in table["families"].items():
            print(f"  {name:<26}{cell['count']:>8.0f} kernels {cell['us'] / 1000:>8.3f} ms")
        for name, cell in list(table["top"].items())[:14]:
            print(f"    {cell['us']:>9.0f} us {cell['count']:>5.1f}x  {name}")
    if not args.skip_vision:
        results["vision"] = vision = vision_profile(model, args, device)
        print(f"\nvision: preprocess {vision['preprocess_ms_per_page']:.1f} ms per page")
        for name, cell in vision.get("tower_kernels", {}).get("top", {}).items():
            print(f"    {cell['us'] / 1000:>8.2f} ms {cell['count']:>5.0f}x  {name}")
    harness.write(results, args, results["device"])


if __name__ == "__main__":
    main()
