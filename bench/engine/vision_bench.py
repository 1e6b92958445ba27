"""The vision tower's model FLOPs a page, ms a page, and the share of the card's dense bf16 peak
it reaches: the tower as transformers builds it, then as the engine runs it, in one command on
the same model (full-size v1, random bf16 weights, SAM's weights at fan-in scale) and card.

Model FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` over transformers' own tower for one
page of the model's size (1024), on the meta device: SAM-base, CLIP-L and the projector, 2 FLOPs
a multiply-add of every matrix product and convolution the model defines (linear layers, the
patch embedding and neck convolutions, attention's q·kᵀ and p·v: SDPA counted as its math, over
the 25 windows of 196 tokens each windowed layer pads the 64 x 64 grid to, the 4,096 tokens of
a global layer and CLIP's 257; the relative-position einsums). Norms, softmax, GELU and adds are
not counted. The same count divides every side's time: the engine's folded attention multiplies
zero and one-hot channels too (reported as ``executed_gflop_per_page``), which is not model work.

Time: CUDA events around ``--reps`` calls (at least two, and 64 pages) after two warm-ups, at
batches of 8, 32 and 64 pages; a batch that does not fit in memory is reported as null. The
sides, each adding one change to the one before (fast_tower.py):

- ``transformers``: transformers' tower and ``get_image_features``, unchanged;
- ``global_folded``: SAM's global layers folded (sam_attention.py; the engine until 2026-12-07);
- ``fast_no_windows``: + the patch embedding as a GEMM, CLIP's q, k, v in one GEMM, the pages'
  features laid out in one batch (``encode_pages``);
- ``engine``: + SAM's windowed layers folded: the tower as the engine runs it now.

Each side's features on the same 8 pages are compared with transformers' (relative L2 in bf16).

    python3 -m bench.engine.vision_bench                    # on the GPU
    python3 -m bench.engine.vision_bench --profile          # + each side's top kernels, batch 32
    python3 -m bench.engine.vision_bench --tiny             # CPU smoke run, the tests' model
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from bench import harness
from bench.engine.setup import build_model
from ocr_worker.engines.unlimited_ocr.model.fast_tower import encode_pages, use_fast_tower
from ocr_worker.engines.unlimited_ocr.model.sam_attention import (
    use_fused_rel_pos,
    use_fused_windows,
)
from tests.worker.engines.unlimited_ocr.tiny_model import _make_vision_live

# Dense bf16 tensor-core peaks (no sparsity), TFLOP/s, from NVIDIA's H100 and H200 datasheets
# (their tables give twice these "with sparsity"). The first name the card's name holds wins.
PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("H200", 989.0))
SIDES = ("transformers", "global_folded", "fast_no_windows", "engine")
Encode = Callable[[torch.Tensor], Any]


def peak_tflops(card: str) -> float | None:
    """The card's dense bf16 peak (None: a card not in the table, or the CPU)."""
    return next((peak for name, peak in PEAK_TFLOPS if name in card), None)


def gflop_per_page(model: Any, fast: bool) -> float:
    """FLOPs (see the docstring) of one page through a meta-device copy of ``model``'s tower:
    transformers' own, or with ``fast`` the engine's."""
    with torch.device("meta"):
        meta = type(model)._from_config(model.config, dtype=model.dtype)
    size = model.config.vision_config.sam_config.image_size
    pixels = torch.empty(1, 3, size, size, device="meta", dtype=model.dtype)
    if fast:
        use_fast_tower(meta)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        encode_pages(meta, pixels) if fast else transformers_encode(meta)(pixels)
    return counter.get_total_flops() / 1e9


def transformers_encode(model: Any) -> Encode:
    return lambda pixels: model.model.get_image_features(pixel_values=pixels).pooler_output


def engine_encode(model: Any) -> Encode:
    return lambda pixels: encode_pages(model, pixels)


def ms_per_page(encode: Encode, pixels: torch.Tensor, reps: int) -> float | None:
    """CUDA events around ``reps`` calls after two warm-ups (wall clock on the CPU); None
    where the batch does not fit on the card."""
    try:
        with torch.no_grad():
            for _ in range(2):
                encode(pixels)
            if pixels.device.type != "cuda":
                return harness.Stopwatch.ms_of(lambda: encode(pixels), repeats=reps) / len(pixels)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                encode(pixels)
            end.record()
            torch.cuda.synchronize()
        return float(start.elapsed_time(end)) / reps / len(pixels)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


def top_kernels(encode: Encode, pixels: torch.Tensor, count: int = 12) -> dict[str, Any]:
    """One call under torch's profiler: the GPU's busy ms a page and the kernels that take it."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        encode(pixels)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            encode(pixels)
            torch.cuda.synchronize()
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            by_name[event.name[:150]][0] += 1
            by_name[event.name[:150]][1] += event.device_time_total / 1000 / len(pixels)
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return {
        "busy_ms_per_page": sum(v[1] for v in by_name.values()),
        "top": [{"ms_per_page": v[1], "launches": v[0], "kernel": k} for k, v in ranked[:count]],
    }


def features_apart(ours: Any, theirs: list[torch.Tensor]) -> float:
    """The largest relative L2 distance of a page's features to transformers'."""
    return max(
        float((a.float() - b.float()).norm() / b.float().norm())
        for a, b in zip(ours, theirs, strict=True)
    )


def apply(side: str, model: Any) -> Encode:
    """``model`` moved to ``side`` from the side before it (SIDES' order)."""
    tower = model.model.vision_tower
    if side == "global_folded":
        use_fused_rel_pos(tower)
    elif side == "fast_no_windows":
        use_fast_tower(model, windows=False)
    elif side == "engine":
        use_fused_windows(tower)
    return transformers_encode(model) if side in SIDES[:2] else engine_encode(model)


def run_side(
    side: str, model: Any, args: Any, pages: torch.Tensor, reference: Any
) -> dict[str, Any]:
    """``side``'s features against transformers' (``reference``, of ``pages``), then its time."""
    encode = apply(side, model)
    device, size = pages.device, pages.shape[-1]
    with torch.no_grad():
        row: dict[str, Any] = {
            "features_rel_l2_vs_transformers": features_apart(encode(pages), reference)
        }
    for batch in args.batch_pages:
        pixels = torch.rand(batch, 3, size, size, device=device).mul_(2).sub_(1).to(model.dtype)
        reps = max(2, -(-64 // batch)) if args.reps is None else args.reps
        row[f"ms_per_page_batch_{batch}"] = ms_per_page(encode, pixels, reps)
        middle = args.batch_pages[len(args.batch_pages) // 2]  # 32 of 8, 32, 64
        if args.profile and device.type == "cuda" and batch == middle:
            row[f"kernels_batch_{batch}"] = top_kernels(encode, pixels)
        del pixels
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def report(results: dict[str, Any], args: Any, peak: float | None) -> None:
    model_gflop = results["model_gflop_per_page"]
    print(
        f"\nvision tower at {results['image_size']}: {model_gflop:.4g} model GFLOP a page "
        f"(the engine executes {results['executed_gflop_per_page']:.4g}); "
        f"peak {peak or float('nan'):.0f} TFLOP/s dense bf16 ({results['device']})"
    )
    print(f"{'side':<17}{'batch':>6}{'ms/page':>9}{'TFLOP/s':>9}{'of peak':>9}   rel L2")
    for side in SIDES:
        row = results["sides"][side]
        for batch in args.batch_pages:
            ms = row[f"ms_per_page_batch_{batch}"]
            tflops = model_gflop / ms if ms else None  # GFLOP / ms = TFLOP/s
            row[f"tflops_batch_{batch}"] = tflops
            row[f"peak_share_batch_{batch}"] = share = tflops / peak if tflops and peak else None
            print(
                f"{side:<17}{batch:>6}"
                + (f"{ms:>9.2f}{tflops:>9.1f}" if ms and tflops else f"{'OOM':>9}{'':>9}")
                + (f"{share:>8.1%}" if share else f"{'':>9}")
                + f"   {row['features_rel_l2_vs_transformers']:.4f}"
            )
        for batch, table in ((b, row.get(f"kernels_batch_{b}")) for b in args.batch_pages):
            if table:
                print(
                    f"  {side}, batch {batch}: GPU busy {table['busy_ms_per_page']:.2f} ms a page"
                )
                for cell in table["top"]:
                    ms, launches = cell["ms_per_page"], cell["launches"]
                    print(f"    {ms:7.3f} ms {launches:5d}x  {cell['kernel']}")


def main() -> None:
    parser = harness.parser(__doc__, tiny=False)
    parser.add_argument("--batch-pages", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--reps", type=int, help="timed calls a batch (default: 64 pages, >= 2)")
    parser.add_argument("--profile", action="store_true", help="each side's top kernels")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if args.tiny:
        args.batch_pages = [b for b in args.batch_pages if b <= 8] or [2]
    model = build_model(args.tiny, device, dtype)
    with torch.no_grad():
        _make_vision_live(model, torch.Generator(device=device).manual_seed(1))
    card = harness.card(device)
    size = model.config.vision_config.sam_config.image_size
    results: dict[str, Any] = {"device": card, "image_size": size, "batch_pages": args.batch_pages}
    results["model_gflop_per_page"] = gflop_per_page(model, fast=False)
    results["executed_gflop_per_page"] = gflop_per_page(model, fast=True)
    results["peak_tflops_dense_bf16"] = peak = peak_tflops(card)
    generator = torch.Generator(device=device).manual_seed(2)
    pages = torch.rand(8, 3, size, size, device=device, generator=generator).mul_(2).sub_(1)
    pages = pages.to(dtype)
    with torch.no_grad():
        reference = transformers_encode(model)(pages)
    results["sides"] = {}
    for side in SIDES:
        results["sides"][side] = run_side(side, model, args, pages, reference)
        print(f"{side}: done", flush=True)
    report(results, args, peak)
    harness.write(results, args, card)


if __name__ == "__main__":
    main()
