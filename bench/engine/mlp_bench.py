"""One decoder MLP layer of the full-size v1 (random bf16 weights) for the decode step: ours
(kernels/moe.py, several tile shapes) against transformers' own module (its grouped_mm experts),
side by side, each replayed from a CUDA graph as the step runs it.

    python3 -m bench.engine.mlp_bench [--tokens 1 16 128]

Prints µs per call and ours/transformers ratios for the MoE layer and the dense first layer
(for the MoE also ``ours_merge_*``: where the shared experts run, fused_mlp.MOE_MERGE; tiles that
do not fit the card's shared memory print as None; ``route_*``: the routing alone by launch),
and the bytes of weights each call must read at the card's bandwidth (the floor)."""

from __future__ import annotations

import functools
from typing import Any

import torch
from triton.runtime.errors import OutOfResources

from bench import harness
from ocr_worker.engines.unlimited_ocr.kernels import routing as routing_kernels
from ocr_worker.engines.unlimited_ocr.kernels import tuning
from ocr_worker.engines.unlimited_ocr.step.fused_mlp import MOE_MERGES, fused_mlp

Tiles = tuning.Tiles
VARIANTS: dict[str, Tiles | None] = {
    "default": None,  # moe_kernels.tiles_for(tokens)
    "k64": Tiles(k=64),
    "n16": Tiles(gate_up_n=16, down_n=16),
    "n16_s4": Tiles(gate_up_n=16, down_n=32, stages=4),
    "s4": Tiles(stages=4),
    "w8_n64_k128": Tiles(gate_up_n=64, down_n=128, warps=8),
    "w8_n64_k128_s4": Tiles(gate_up_n=64, down_n=128, warps=8, stages=4),
    "w4_n64_k64": Tiles(gate_up_n=64, down_n=128, k=64),
    # the same launches over pair_plan's table instead of a scan of the top-k table a program
    "plan_s4": Tiles(stages=4, plan=True),
    "plan_w8_n64_k128": Tiles(gate_up_n=64, down_n=128, warps=8, plan=True),
    "plan_n16_s4": Tiles(gate_up_n=16, down_n=32, stages=4, plan=True),
    "plan_n32_s3": Tiles(plan=True),
    "plan_n32_k64_s4": Tiles(k=64, stages=4, plan=True),
    "plan_w8_n64_k64_s4": Tiles(gate_up_n=64, down_n=128, k=64, warps=8, stages=4, plan=True),
    "plan_w4_n64_k64_s4": Tiles(gate_up_n=64, down_n=64, k=64, stages=4, plan=True),
    "plan_w4_n16_k128_s5": Tiles(gate_up_n=16, down_n=16, stages=5, plan=True),
    "plan_w8_n32_s2": Tiles(gate_up_n=32, down_n=64, warps=8, stages=2, plan=True),
    # each tile transposed (weights · rowsᵀ): Hopper's warpgroup MMA (M = the weights' rows)
    "swap_w4_n64": Tiles(gate_up_n=64, down_n=128, swap=True),
    "swap_w4_n64_s2": Tiles(gate_up_n=64, down_n=128, stages=2, swap=True),
    "swap_w4_n64_s4": Tiles(gate_up_n=64, down_n=64, stages=4, swap=True),
    "swap_w4_n64_k64_s4": Tiles(gate_up_n=64, down_n=64, k=64, stages=4, swap=True),
    "swap_w4_n64_k64_s6": Tiles(gate_up_n=64, down_n=128, k=64, stages=6, swap=True),
    "swap_w8_n128": Tiles(gate_up_n=128, down_n=128, warps=8, swap=True),
    "swap_plan_w4_n64": Tiles(gate_up_n=64, down_n=128, swap=True, plan=True),
    "swap_plan_w4_n64_k64_s4": Tiles(gate_up_n=64, down_n=64, k=64, stages=4, swap=True, plan=True),
    "swap_plan_w4_n64_k64_s6": Tiles(gate_up_n=64, down_n=64, k=64, stages=6, swap=True, plan=True),
    "swap_plan_w4_n64_d128_k64_s4": Tiles(
        gate_up_n=64, down_n=128, k=64, stages=4, swap=True, plan=True
    ),
    "swap_plan_w8_n128_k64_s4": Tiles(
        gate_up_n=128, down_n=128, k=64, warps=8, stages=4, swap=True, plan=True
    ),
    "swap_plan_w4_n64_k32_s6": Tiles(gate_up_n=64, down_n=64, k=32, stages=6, swap=True, plan=True),
    # more of each expert's bytes in flight, for the H200's bandwidth (~50% of it on 2026-12-05:
    # bench/RESULTS.md, "GPU engine: kernels")
    "swap_plan_w4_n64_k64_s5": Tiles(gate_up_n=64, down_n=64, k=64, stages=5, swap=True, plan=True),
    "swap_plan_w4_n64_k128_s3": Tiles(gate_up_n=64, down_n=64, stages=3, swap=True, plan=True),
    "swap_plan_w4_n128_k64_s4": Tiles(
        gate_up_n=128, down_n=128, k=64, stages=4, swap=True, plan=True
    ),
    "swap_plan_w8_n64_k64_s4": Tiles(
        gate_up_n=64, down_n=64, k=64, warps=8, stages=4, swap=True, plan=True
    ),
}
ROUTERS: dict[str, routing_kernels.RouterLaunch | None] = {  # in one kernel, or logits then top-k
    "default": None,  # routing_kernels.router_for(tokens)
    "fused_b128_s4": routing_kernels.RouterLaunch(block=128, stages=4),
    "fused_b64_s5": routing_kernels.RouterLaunch(block=64, stages=5),
    "fused_b32_s8": routing_kernels.RouterLaunch(block=32, stages=8),
    "split_g8_b256": routing_kernels.RouterLaunch(fused=False, group=8, block=256),
    "split_g8_row": routing_kernels.RouterLaunch(fused=False, group=8, block=None),
    "split_g4_row": routing_kernels.RouterLaunch(fused=False, group=4, block=None),
    "split_g2_row": routing_kernels.RouterLaunch(fused=False, group=2, block=None),
    "split_g1_row": routing_kernels.RouterLaunch(fused=False, group=1, block=None),
    "split_g16_b256": routing_kernels.RouterLaunch(fused=False, group=16, block=256),
}
BANDWIDTH = 4.8e12  # H200 HBM3e, bytes/s
UNFIT = (OutOfResources,)  # tiles that do not fit the card (its shared memory): timed as None


def weight_bytes(mlp, tokens: int, h: torch.Tensor) -> int:  # type: ignore[no-untyped-def]
    """Bytes of weights the call must read: the experts chosen for these tokens, all shared."""
    if not hasattr(mlp, "experts"):
        return sum(p.numel() * p.element_size() for p in mlp.parameters())
    with torch.no_grad():
        chosen = mlp.gate(h)[2].unique().numel()
    per_expert = (mlp.experts.gate_up_proj[0].numel() + mlp.experts.down_proj[0].numel()) * 2
    shared = sum(p.numel() * p.element_size() for p in mlp.shared_experts.parameters())
    return int(chosen * per_expert + shared)


def v1_layers(count: int, device: torch.device):  # type: ignore[no-untyped-def]
    """The first ``count`` decoder layers of v1 (the dense one, then MoE), random bf16."""
    from transformers.models.unlimited_ocr import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
    )

    from bench.engine.full_checkpoint import randomize
    from tests.worker.engines.unlimited_ocr.tiny_model import TINY_VISION

    config = UnlimitedOcrConfig(vision_config=TINY_VISION, text_config={"num_hidden_layers": count})
    with torch.device(device):
        model = UnlimitedOcrForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    randomize(model, torch.Generator(device=device).manual_seed(0))
    return model.eval().model.language_model.layers


def _route(ours: Any, h: torch.Tensor, launch: routing_kernels.RouterLaunch | None) -> Any:
    return routing_kernels.route(h, ours.router, ours.top_k, ours.scale, launch)


def _call_module(mlp: Any, h: torch.Tensor) -> torch.Tensor:
    return mlp(h[None])  # type: ignore[no-any-return]


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--tiles", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    device = torch.device("cuda")
    layers = v1_layers(2, device)
    results: dict = {}
    for name, mlp in (("dense", layers[0].mlp), ("moe", layers[1].mlp)):
        ours: Any = fused_mlp(mlp, dense=True)
        for tokens in args.tokens:
            gen = torch.Generator(device=device).manual_seed(tokens)
            h = torch.randn(tokens, 1280, device=device, dtype=torch.bfloat16, generator=gen)
            with torch.no_grad():
                row: dict[str, float | None] = {
                    "transformers_us": harness.graphed_us(functools.partial(_call_module, mlp, h))
                }
                expected = _call_module(mlp, h)[0].float()
                for variant in args.tiles:
                    ours.tiles = VARIANTS[variant]
                    row[f"ours_{variant}_us"] = us = harness.graphed_us(
                        functools.partial(ours, h), unfit=UNFIT
                    )
                    if us is not None:  # its values against the module's (bf16: well under 1%)
                        off = (ours(h).float() - expected).norm() / expected.norm()
                        row[f"error_{variant}"] = off.item()
                ours.tiles = None
                if hasattr(ours, "router"):  # routing alone (logits, then top-k), by launch
                    chosen = []
                    for label, launch in ROUTERS.items():
                        call = functools.partial(_route, ours, h, launch)
                        row[f"route_{label}_us"] = harness.graphed_us(call, unfit=UNFIT)
                        chosen.append(call()[0].sort(dim=1).values)
                    # rows whose experts every launch chose alike (a near-tie may differ)
                    same = torch.stack([(c == chosen[0]).all(dim=1) for c in chosen]).all(dim=0)
                    row["routes_agree"] = same.float().mean().item()
                if hasattr(ours, "merge"):  # where the shared experts run, beside the default
                    default, values = ours.merge, []
                    for merge in MOE_MERGES:
                        ours.merge = merge
                        row[f"ours_merge_{merge}_us"] = us = harness.graphed_us(
                            functools.partial(ours, h), unfit=UNFIT
                        )
                        if us is not None:  # a layout whose tiles fit the card
                            values.append(ours(h))
                    ours.merge = default
                    # the same values wherever the shared experts run (1.0: bit for bit)
                    row["merges_equal"] = float(all(torch.equal(v, values[0]) for v in values))
            row["floor_us"] = weight_bytes(mlp, tokens, h) / BANDWIDTH * 1e6
            results[f"{name}_{tokens}"] = row
            timed_ours = [(v, k) for k, v in row.items() if k.startswith("ours_") and v]
            routes = [(v, k) for k, v in row.items() if k.startswith("route_") and v]
            if routes:
                print(f"    routing: {row['route_default_us']:.1f} µs, best {min(routes)}")
            best = min(timed_ours, default=(0.0, "none fit"))
            theirs, mine = row["transformers_us"] or 0.0, row.get("ours_default_us")
            print(
                f"{name:5} {tokens:4} tokens: transformers {theirs:7.1f} µs, ours "
                + (f"{mine:7.1f}, ratio {mine / theirs:.2f}" if mine else "n/a")
                + f" (best {best[1]} {best[0]:.1f}), floor {row['floor_us']:.1f}",
                flush=True,
            )
            timings = {k: v for k, v in row.items() if not k.startswith("error_")}
            print("   ", {k: v if v is None else round(v, 1) for k, v in timings.items()})
            errors = {k[6:]: f"{v:.1e}" for k, v in row.items() if k.startswith("error_") and v}
            print("    relative error against the module:", errors, flush=True)
    harness.write(results, args, harness.card(device))


if __name__ == "__main__":
    main()
