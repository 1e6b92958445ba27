"""A prefill pass's attention, one layer at v1's shape, each way the engine can run it, replayed
from CUDA graphs (harness.graphed_us):

- ``flash``: K and V gathered out of the pool, then torch's varlen flash attention (FA2), the
  engine's launch before (PrefillPass.attend);
- each of tuning.PREFILL_TILES: the Triton kernel reading the pool in place.

    python3 -m bench.engine.prefill_attention_bench [--groups 7] [--out prefill_attention.json]

A pass of 7 groups of 8 pages (2,185 rows each, as the 128-document runs pass them), and the
same groups with a boundary page's 274 rows as past rows (1,911 new). Prints µs a layer, the
ratio against flash, TFLOP/s of the causal products, and each way's error against flash
(relative, over the whole output): bf16 rounding only, ~0.3%; a wrong mask is ~100%."""

from __future__ import annotations

import functools

import torch

from bench import harness
from ocr_worker.engines.unlimited_ocr.kernels.prefill_attention import paged_prefill_attention
from ocr_worker.engines.unlimited_ocr.kernels.tuning import (
    PREFILL_TILES,
    PrefillTile,
    card_name,
    tuning_for,
)
from tests.worker.engines.unlimited_ocr.prefill_passes import packed_pass

HEADS, DIM = 10, 128  # v1's decoder
POOL_ROWS = 200_000  # a 24 GB pool's layer: a pass's rows lie anywhere in it
GROUP_ROWS, PAGE_ROWS = 2185, 274  # an 8-page group's prefill; one page of it


def a_pass(groups: int, past: int, device: torch.device):  # type: ignore[no-untyped-def]
    """(q, k_pool, v_pool, packed, FLOPs): ``groups`` parts of GROUP_ROWS rows each, the first
    ``past`` of them past rows, scattered over the pool in blocks of 256 rows as the KV
    workspace hands them out."""
    g = torch.Generator(device=device).manual_seed(past)
    k_pool, v_pool = (
        torch.randn(POOL_ROWS, HEADS, DIM, device=device, dtype=torch.bfloat16, generator=g)
        for _ in range(2)
    )
    blocks = torch.randperm(POOL_ROWS // 256, device=device, generator=g)
    pool_rows = (blocks[:, None] * 256 + torch.arange(256, device=device)).flatten()
    new = GROUP_ROWS - past
    packed = packed_pass([(past, new)] * groups, pool_rows)
    q = torch.randn(new * groups, HEADS, DIM, device=device, dtype=torch.bfloat16, generator=g)
    seen = new * past + new * (new + 1) // 2  # keys over a part's queries, causal
    flops = 4 * HEADS * DIM * seen * groups
    return q, k_pool, v_pool, packed, flops


def measure(groups: int, past: int, device: torch.device) -> dict[str, float]:
    q, k_pool, v_pool, packed, flops = a_pass(groups, past, device)
    flash = functools.partial(packed.attend, q, k_pool, v_pool)
    expected = flash().float()
    row = {"flash_us": harness.graphed_us(flash), "gflop": flops / 1e9}
    for tile in PREFILL_TILES:
        name = _name(tile)
        ours = functools.partial(
            paged_prefill_attention, q, k_pool, v_pool, packed.rows, packed.bounds,
            packed.longest[0], tile,
        )  # fmt: skip
        row[f"{name}_error"] = ((ours().float() - expected).norm() / expected.norm()).item()
        row[f"{name}_us"] = harness.graphed_us(ours)
    return row


def _name(tile: PrefillTile) -> str:
    return f"q{tile.queries}_k{tile.keys}_w{tile.warps}_s{tile.stages}"


def main() -> None:
    parser = harness.parser(__doc__, groups=7, help={"groups": "page groups a pass"})
    args = parser.parse_args()
    device = torch.device("cuda")
    report: dict[str, object] = {"device": torch.cuda.get_device_name(), "groups": args.groups}
    default = tuning_for(card_name(device)).prefill_attention
    for past in (0, PAGE_ROWS):
        row = measure(args.groups, past, device)
        report[f"past_{past}"] = row
        flash = row["flash_us"]
        tflops = row["gflop"] / flash * 1e3  # GFLOP a µs: PFLOP/s
        print(f"{args.groups} groups, {past} past rows each: {row['gflop']:.1f} GFLOP a layer")
        print(f"  flash (gathers + FA2)     {flash:7.1f} µs  1.00x  {tflops:5.0f} TFLOP/s")
        for tile in PREFILL_TILES:
            name = _name(tile)
            us, error = row[f"{name}_us"], row[f"{name}_error"]
            mark = " (default)" if tile == default else ""
            print(
                f"  {name:<24} {us:7.1f} µs  {flash / us:.2f}x  {row['gflop'] / us * 1e3:5.0f} "
                f"TFLOP/s  error {error:.2%}{mark}"
            )
    harness.write(report, args, harness.card(device))


if __name__ == "__main__":
    main()
