"""A prefill pass's small kernels at v1's shape, each launch side by side with the one the
engine ran before, replayed from CUDA graphs (harness.graphed_us):

- ``rope_store`` (kernels/norms.py): the pass's rows of 10 heads, by heads a program; one head a
  program is the launch before, all of a row's the default now;
- the fused routing (kernels/routing.py: _route_rows): the pass's rows by tokens a program; 16 a
  program is the launch before.

    python3 -m bench.engine.pass_kernels_bench [--rows 15295 128] [--out pass_kernels.json]

15,295 rows: 7 groups of 8 pages (2,185 rows each), as the 128-document runs pass them; 128:
a step of 128 sequences. Prints µs a layer, against the launch before, and the TB/s of the bytes
each must move (rope_store: qkv read, q, k and v written; routing: h read, a lower bound: each
program reads the router's 327 KB too). Replayed back to back, a layer's inputs may stay in
the card's L2 (50 MB on an H100), as the engine's would not: the ratios are the measure."""

from __future__ import annotations

import functools

import torch

from bench import harness
from ocr_worker.engines.unlimited_ocr.kernels import norms
from ocr_worker.engines.unlimited_ocr.kernels import routing as routing_kernels

HIDDEN, HEADS, DIM, EXPERTS, TOP_K = 1280, 10, 128, 64, 6  # v1's decoder
POOL_ROWS = 200_000  # the rows written land anywhere in a 24 GB pool's layer
HEADS_BLOCKS = (1, 2, 4, 16)  # 16: a row's 10 heads in one program, the default
ROUTER_ROWS = (16, 32, 64, 128)  # 16: the launch before


def rope_row(rows: int, device: torch.device) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(rows, 3 * HEADS * DIM, device=device, dtype=torch.bfloat16, generator=g)
    cos = torch.randn(rows, DIM, device=device, dtype=torch.bfloat16, generator=g)
    sin = torch.randn(rows, DIM, device=device, dtype=torch.bfloat16, generator=g)
    pool = torch.zeros(POOL_ROWS, HEADS, DIM, device=device, dtype=torch.bfloat16)
    k_pool, v_pool = pool, pool.clone()
    write = torch.randperm(POOL_ROWS, device=device, generator=g)[:rows]
    moved = rows * (2 * 3 * HEADS * DIM * 2 + DIM * 2)  # qkv in, q k v out; half of cos, sin
    row: dict[str, float] = {}
    for block in HEADS_BLOCKS:
        us = harness.graphed_us(
            functools.partial(norms.rope_store, qkv, cos, sin, k_pool, v_pool, write, block)
        )
        row[f"heads_{block}_us"] = us
        row[f"heads_{block}_tb_s"] = moved / us / 1e6
    return row


def route_row(rows: int, device: torch.device) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(1)
    h = torch.randn(rows, HIDDEN, device=device, dtype=torch.bfloat16, generator=g)
    router = torch.randn(EXPERTS, HIDDEN, device=device, generator=g) / HIDDEN**0.5
    row: dict[str, float] = {}
    for count in ROUTER_ROWS:
        launch = routing_kernels.RouterLaunch(rows=count)
        us = harness.graphed_us(functools.partial(_route_ids, h, router, launch))
        row[f"rows_{count}_us"] = us
        row[f"rows_{count}_tb_s"] = rows * HIDDEN * 2 / us / 1e6
    return row


def _route_ids(
    h: torch.Tensor, router: torch.Tensor, launch: routing_kernels.RouterLaunch
) -> torch.Tensor:
    return routing_kernels.route(h, router, TOP_K, 1.0, launch)[0]


def report(name: str, row: dict[str, float], keys: tuple[int, ...], prefix: str) -> None:
    before = row[f"{prefix}_{keys[0]}_us"]
    print(name)
    for key in keys:
        us, rate = row[f"{prefix}_{key}_us"], row[f"{prefix}_{key}_tb_s"]
        print(f"  {prefix} {key}: {us:7.1f} µs ({before / us:.2f}x the first, {rate:.2f} TB/s)")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[15_295, 128])
    args = parser.parse_args()
    device = torch.device("cuda")
    results: dict[str, dict[str, float]] = {}
    for rows in args.rows:
        results[f"rope_{rows}"] = rope = rope_row(rows, device)
        report(f"rope_store, {rows} rows (a layer)", rope, HEADS_BLOCKS, "heads")
        if routing_kernels.router_for(rows).fused:  # a step of few is split in two kernels
            results[f"route_{rows}"] = route = route_row(rows, device)
            report(f"routing in one kernel, {rows} rows (a layer)", route, ROUTER_ROWS, "rows")
    harness.write(results, args, harness.card(device))


if __name__ == "__main__":
    main()
