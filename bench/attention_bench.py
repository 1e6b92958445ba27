"""The decode step's attention over the block pool (triton_kernels.paged_decode_attention) at
v1's shape, the way a step runs it: 12 layers, each sequence reading its page group's prefix
(8 pages in 32-row blocks scattered over the pool) and its 128-row ring, replayed from a CUDA
graph. Side by side in one run:

- ``gather_sdpa``: the rows copied out of the pool, then torch's SDPA (the torch step's way);
- ``cuda_cores``: our kernel with only the tiles that multiply on the CUDA cores (before);
- ``all_tiles``: our kernel with every tile the autotuner may pick (triton_kernels.TILES),
  also at other slice targets (``TARGET_PROGRAMS``);

    python3 -m bench.attention_bench [--batches 1 16 128] [--targets 1024 4096]

Prints µs per step (12 layers), the bytes of K and V read at the achieved TB/s, the ratio to
``cuda_cores``, the tile the autotuner chose, and the largest difference from SDPA (bf16)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import triton

from bench.mlp_bench import graphed_us
from ocr_worker.engines.unlimited_ocr import triton_kernels as kernels

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


def measure(batch: int, targets: list[int], device: torch.device) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(batch)
    rows, pool_rows = row_table(batch, generator)
    rows = rows.to(device)
    valid = torch.ones_like(rows, dtype=torch.bool)
    shape = (LAYERS, pool_rows, HEADS, DIM)
    k_pool = torch.randn(shape, device=device, dtype=torch.bfloat16)
    v_pool = torch.randn(shape, device=device, dtype=torch.bfloat16)
    q = torch.randn(LAYERS, batch, HEADS, DIM, device=device, dtype=torch.bfloat16)
    width = rows.shape[1]

    def ours() -> torch.Tensor:
        return torch.stack(
            [
                kernels.paged_decode_attention(q[i], k_pool[i], v_pool[i], rows, valid)
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
        us = graphed_us(call, repeats=5)
        report[name] = {"us": us, "tb_per_s": bytes_read / us / 1e6, "max_diff": difference}

    record("gather_sdpa", gather_sdpa)
    all_configs = kernels._attention_slices.configs
    default_target = kernels.TARGET_PROGRAMS
    try:
        kernels._attention_slices.configs = [c for c in all_configs if not c.kwargs["MMA"]]
        kernels._attention_slices.cache.clear()
        record("cuda_cores", ours)
        report["cuda_cores"]["chose"] = str(kernels._attention_slices.best_config)
        kernels._attention_slices.configs = all_configs
        for target in [default_target, *[t for t in targets if t != default_target]]:
            kernels.TARGET_PROGRAMS = target
            kernels._attention_slices.cache.clear()
            name = f"all_tiles_{target}"
            record(name, ours)
            report[name]["chose"] = str(kernels._attention_slices.best_config)
            report[name]["slices"] = kernels.attention_slices(batch, HEADS, width)[1]
            report[name]["vs_cuda_cores"] = report["cuda_cores"]["us"] / report[name]["us"]
    finally:
        kernels._attention_slices.configs = all_configs
        kernels.TARGET_PROGRAMS = default_target
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--targets", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    device = torch.device("cuda")
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device),
        "triton": triton.__version__,
        "default_target": kernels.TARGET_PROGRAMS,
    }
    for batch in args.batches:
        report = measure(batch, args.targets, device)
        results[f"batch_{batch}"] = report
        torch.cuda.empty_cache()  # the pools of this batch size are gone
        for name, row in report.items():
            if isinstance(row, dict):
                extra = {k: v for k, v in row.items() if k not in ("us", "tb_per_s")}
                speed = f"{row['us']:9.1f} us {row['tb_per_s']:5.2f} TB/s"
                print(f"{batch:4d} seqs {name:16s} {speed} {extra}")
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
