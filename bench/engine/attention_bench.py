"""The decode step's attention over the block pool (triton_kernels.paged_decode_attention) at
v1's shape, the way a step runs it: 12 layers, each sequence reading its page group's prefix
(8 pages in 32-row blocks scattered over the pool, as a long-running worker leaves it) and its
128-row ring, replayed from a CUDA graph. Side by side in one run:

- ``gather_sdpa``: the rows copied out of the pool, then torch's SDPA (the torch step's way);
- every tile of tuning.TILES (or ``--tiles``) at several program targets (slices a head);
- ``before``: the fastest CUDA-core tile at 1,024 programs, the best Triton's autotuner could
  pick before (it picked on the graphs' padding rows, so the engine ran no faster than this);
- ``default``: triton_kernels.attention_plan for this card and batch, what the engine runs.

    python3 -m bench.engine.attention_bench [--batches 1 16 128] [--targets 1024 2048 4096 8192]
        [--tiles mma_b16_w1_s2 mma_b16_w1_s4 ...]   # in place of TILES, named as printed

Prints µs per step (12 layers), the bytes of K and V read at the achieved TB/s, before/default
and the fastest of the grid, and the largest difference from SDPA (bf16)."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton

from bench import harness
from ocr_worker.engines.unlimited_ocr.kernels import decode_attention as kernels
from ocr_worker.engines.unlimited_ocr.kernels import tuning

LAYERS, HEADS, DIM = 12, 10, 128  # v1's decoder
BLOCK_ROWS, PAGE_TOKENS, PAGES, WINDOW = 32, 273, 8, 128


def row_table(batch: int, generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """(batch, width) pool rows: each sequence's pages in whole blocks placed at random over
    the pool, then its ring; and the pool's size in rows."""
    page_blocks = -(-PAGE_TOKENS // BLOCK_ROWS)
    blocks_each = PAGES * page_blocks + WINDOW // BLOCK_ROWS
    order = torch.randperm(batch * blocks_each, generator=generator).view(batch, blocks_each)
    within = torch.arange(BLOCK_ROWS)
    tables = []
    for blocks in order:
        pages = blocks[: PAGES * page_blocks].view(PAGES, -1)
        prefix = [(page[:, None] * BLOCK_ROWS + within).flatten()[:PAGE_TOKENS] for page in pages]
        ring = (blocks[PAGES * page_blocks :, None] * BLOCK_ROWS + within).flatten()
        tables.append(torch.cat([*prefix, ring]))
    return torch.stack(tables), batch * blocks_each * BLOCK_ROWS


def tile_name(tile: tuning.Tile) -> str:
    return f"{'mma' if tile.mma else 'cuda'}_b{tile.block}_w{tile.warps}_s{tile.stages}"


def parse_tile(name: str) -> tuning.Tile:
    """``mma_b16_w1_s4`` (tile_name's form) as a Tile."""
    try:
        form, block, warps, stages = name.split("_")
        assert form in ("mma", "cuda") and block[0] == "b" and warps[0] == "w" and stages[0] == "s"
        return tuning.Tile(int(block[1:]), int(warps[1:]), int(stages[1:]), mma=form == "mma")
    except (ValueError, AssertionError):
        raise argparse.ArgumentTypeError(f"{name!r} is not a tile such as mma_b16_w1_s3") from None


def parse_plan(text: str) -> tuning.AttentionPlan:
    """``mma_b32_w1_s3@4096`` (the grid's names) as the plan of the steps over 16 sequences."""
    tile, _, programs = text.partition("@")
    if not programs.isdigit() or int(programs) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a plan such as mma_b32_w1_s3@4096")
    return tuning.AttentionPlan(tuning.ANY, parse_tile(tile), int(programs))


def plan_name(plan: tuning.AttentionPlan) -> str:
    """parse_plan's form: ``mma_b32_w1_s3@4096``."""
    return f"{tile_name(plan.tile)}@{plan.programs}"


def with_plan(card: str, plan: tuning.AttentionPlan) -> tuple[tuning.AttentionPlan, ...]:
    """The card's plans for steps of up to 16 sequences, then ``plan`` for every larger step."""
    return (*(kept for kept in kernels.plans_for(card) if kept.up_to <= 16), plan)


def measure(
    batch: int, targets: list[int], tiles: list[tuning.Tile], device: torch.device
) -> dict[str, Any]:
    """One batch size: SDPA, the grid, the default; µs per step of 12 layers."""
    generator = torch.Generator().manual_seed(batch)
    rows, pool_rows = row_table(batch, generator)
    rows = rows.to(device)
    valid = torch.ones_like(rows, dtype=torch.bool)
    shape = (LAYERS, pool_rows, HEADS, DIM)
    k_pool = torch.randn(shape, device=device, dtype=torch.bfloat16)
    v_pool = torch.randn(shape, device=device, dtype=torch.bfloat16)
    q = torch.randn(LAYERS, batch, HEADS, DIM, device=device, dtype=torch.bfloat16)
    width = rows.shape[1]

    def ours(tile: tuning.Tile, programs: int | None) -> torch.Tensor:
        return torch.stack(
            [
                kernels.paged_decode_attention(
                    q[i], k_pool[i], v_pool[i], rows, valid, tile, programs
                )
                for i in range(LAYERS)
            ]
        )

    def gather_sdpa() -> torch.Tensor:
        return torch.stack(
            [
                F.scaled_dot_product_attention(
                    q[i][:, :, None],
                    k_pool[i][rows].transpose(1, 2),
                    v_pool[i][rows].transpose(1, 2),
                )[:, :, 0]
                for i in range(LAYERS)
            ]
        )

    bytes_read = 2 * LAYERS * batch * width * HEADS * DIM * 2
    expected = gather_sdpa()
    report: dict[str, Any] = {"width": width, "kv_bytes": bytes_read}

    def record(name: str, call: Callable[[], torch.Tensor]) -> None:
        difference = (call().float() - expected.float()).abs().max().item()
        us = harness.graphed_us(call, repeats=5)
        report[name] = {"us": us, "tb_per_s": bytes_read / us / 1e6, "max_diff": difference}

    record("gather_sdpa", gather_sdpa)
    grid: dict[str, float] = {}
    for target in targets:
        for tile in tiles:
            call = functools.partial(ours, tile, target)
            grid[f"{tile_name(tile)}@{target}"] = harness.graphed_us(call, repeats=5)
    report["grid_us"] = grid
    old = [us for name, us in grid.items() if name.startswith("cuda") and name.endswith("@1024")]
    before = min(old, default=float("nan"))
    plan = kernels.attention_plan(batch, tuning.card_name(device))
    record("default", functools.partial(ours, plan.tile, plan.programs))
    fastest = min(grid, key=grid.__getitem__)
    report["before_us"] = before
    report["fastest"] = {"name": fastest, "us": grid[fastest]}
    report["before_over_default"] = before / report["default"]["us"]
    report["default_over_fastest"] = report["default"]["us"] / grid[fastest]
    return report


def main() -> None:
    parser = harness.parser(__doc__, batches=[1, 16, 128])
    parser.add_argument("--targets", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument(
        "--tiles", type=parse_tile, nargs="+", help="the grid's tiles (tuning.TILES)"
    )
    args = parser.parse_args()
    device = torch.device("cuda")
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device),
        "triton": triton.__version__,
        "plans": str(kernels.plans_for(tuning.card_name(device))),
    }
    for batch in args.batches:
        report = measure(batch, args.targets, args.tiles or tuning.TILES, device)
        results[f"batch_{batch}"] = report
        torch.cuda.empty_cache()  # the pools of this batch size are gone
        for name in ("gather_sdpa", "default"):
            row = report[name]
            speed = f"{row['us']:9.1f} us {row['tb_per_s']:5.2f} TB/s"
            print(f"{batch:4d} seqs {name:12s} {speed} max diff {row['max_diff']:.2g}")
        print(
            f"{batch:4d} seqs before {report['before_us']:.1f} us: before/default "
            f"{report['before_over_default']:.2f}; fastest {report['fastest']} "
            f"(default/fastest {report['default_over_fastest']:.2f})"
        )
    text = json.dumps(results, indent=1)
    print(text)
    harness.write(results, args, harness.card(device))


if __name__ == "__main__":
    main()
