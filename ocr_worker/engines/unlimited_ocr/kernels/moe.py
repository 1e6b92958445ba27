"""The decoder's MoE layers for the decode step: after routing (routing_kernels.py), three
Triton kernels (GPU, or Triton's interpreter in tests): the gate/up projections with SiLU,
the down projections, and the weighted sum with the shared experts, which also adds the layer's
output to the residual stream and applies the next RMSNorm. The routed experts and the shared
ones can share the two projection launches (fused_mlp.MOE_MERGE): one token's six experts and
the shared pair then run side by side instead of one launch after the other. Each launch is
compiled for the MLPs it runs only (WITH_ROUTED / WITH_UNROUTED): a program compiled for both
branches of an if/else once held both tile sets' shared memory, and ran slower for it.

The step profile (bench/RESULTS.md) found transformers' MoE at ~25 kernels per layer for one
token: an fp32 router GEMM, softmax, top-k, a sort, a histogram, gathers, two grouped GEMMs,
SiLU, the weighting and an unpermute. Here routing runs on the GPU with no host sync: each
program of the expert kernels finds the pairs (token, choice) routed to its expert by itself,
from the top-k table (a step of up to 32 tokens) or from pair_plan's table of pairs grouped by
expert (one small launch, for more), and skips the work when there are none, so one token
reads only its six experts' weights and 128 tokens read each chosen expert's weights once.

Rounding follows transformers' grouped_mm path: projections rounded to the model's dtype,
SiLU(gate)·up in that dtype, the routing weight applied in fp32, the top-k summed in fp32 and
rounded once, then the shared experts' output added in the model's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels.decode_attention import (
    dot_precision,
    residual_rms_norm,
)


@dataclass(frozen=True)
class Tiles:
    """Tile widths and launch shape of the expert kernels (bench/mlp_bench.py compares some)."""

    gate_up_n: int = 32
    down_n: int = 64
    k: int = 128
    warps: int = 4
    stages: int = 3
    # Read pair_plan's table even below SORT_PAIRS_ABOVE: one small launch, against a scan of
    # the top-k table in every program (which grows with the programs, the narrower the tiles).
    plan: bool = False
    # Each tile computed transposed (weights · rowsᵀ): the weights' BLOCK_N rows are the MMA's
    # M side and a step's ≤ 32 pairs its N side, instead of padding those pairs to M. Hopper's
    # warpgroup MMA needs M ≥ 64: only tiles 64 wide or more get it (32-wide stay mma.sync).
    swap: bool = False


# Above this many tokens a launch is a prefill's: the expert kernels read pair_plan's table
# rather than scanning the top-k table in every program (a scan of 13k pairs per program at a
# prefill's 2,185 tokens), whatever the tiles say, and take PREFILL_TILES.
SORT_PAIRS_ABOVE = 256

# By the rows a launch multiplies (bench/mlp_bench.py, bench/RESULTS.md). A step of few
# sequences, where few experts work: narrow tiles, a deeper pipeline (H200: 46 µs a layer at 1
# token, 119 at 16). A step of many, where every expert has a dozen pairs: each tile transposed
# onto Hopper's warpgroup MMA over pair_plan's table, 64-deep slices of K, four stages (H100,
# run I2: 189.7 µs a layer at 128 tokens against 201.6, the 128-sequence step 7.89 ms against
# 8.24; six stages were as fast, 190.3 µs and 7.88 ms, in 1.5x the shared memory).
# A prefill's thousands (PREFILL_MOE "kernels", not the default): wide tiles, eight warps,
# the step's tiles of 128 tokens before run I, not timed at a prefill's sizes.
FEW_TOKENS = 32
FEW_TOKENS_TILES = Tiles(stages=4)
MANY_TOKENS_TILES = Tiles(gate_up_n=64, down_n=64, k=64, stages=4, swap=True, plan=True)
PREFILL_TILES = Tiles(gate_up_n=64, down_n=128, warps=8)


def tiles_for(tokens: int) -> Tiles:
    """The tiles of a launch over ``tokens`` rows, by the regimes above."""
    if tokens <= FEW_TOKENS:
        return FEW_TOKENS_TILES
    return MANY_TOKENS_TILES if tokens <= SORT_PAIRS_ABOVE else PREFILL_TILES


def rows_per_program(tokens: int) -> int:
    """Pairs one program takes: tl.dot's smallest tile (16) while that holds an expert's usual
    share (top-6 of 64: ~1.5 pairs per 16 tokens), else 32, so that at 128 tokens (~12 pairs
    per expert, rarely over 20) each expert's weights are still read once; 64 for a prefill's
    thousands (~200 pairs an expert), where the tile's arithmetic, not the weights' bytes,
    sets the pace."""
    return 16 if tokens <= FEW_TOKENS else 32 if tokens <= SORT_PAIRS_ABOVE else 64


# Pairs a _pair_plan program places. A step's (768 at 128 sequences) fit one chunk of
# STEP_PLAN_CHUNK or PLAN_CHUNK: one launch whose programs count the lower experts' pairs
# themselves. More (a prefill's: 13k a group, ~92k a pass) take a chunk a program along axis
# 1, after _pair_counts has counted each chunk's pairs an expert. Before, one program an
# expert looped over every chunk twice: 95 µs a layer for a pass on an H100 (run R), a
# group's 150 µs. Every size a few compiles: two chunk widths, and a counts table of at
# least COUNTS_ROWS chunks (a pass of 16,384 rows has 24).
PLAN_CHUNK = 4096
STEP_PLAN_CHUNK = 1024
COUNTS_ROWS = 32


@triton.jit
def _pair_counts(ids_ptr, counts_ptr, pairs, EXPERTS: tl.constexpr, CHUNK: tl.constexpr):
    """Program (expert, chunk): how many of the chunk's pairs are routed to the expert, into
    counts[chunk, expert]."""
    expert, chunk = tl.program_id(0), tl.program_id(1)
    pair = chunk * CHUNK + tl.arange(0, CHUNK)
    mine = _plan_ids(ids_ptr, pair, pairs, EXPERTS) == expert
    tl.store(counts_ptr + chunk * EXPERTS + expert, tl.sum(mine.to(tl.int32), axis=0))


@triton.jit
def _pair_plan(
    ids_ptr,
    plan_ptr,
    slots_ptr,
    counts_ptr,
    pairs,
    EXPERTS: tl.constexpr,
    CHUNK: tl.constexpr,
    COUNTED: tl.constexpr,  # _pair_counts' table (chunk, expert) given; else one chunk
    ROWS_POW2: tl.constexpr,  # the table's rows (chunks), padded
    EXPERTS_POW2: tl.constexpr,
    SLOTS: tl.constexpr,
):
    """Program (expert, chunk): the chunk's pairs routed to the expert, in pair order, placed
    in the grouped list after every pair of a lower expert and the expert's pairs of earlier
    chunks; chunk 0 also stores where the expert's pairs start. SLOTS: also each pair's place,
    at the pair's index (the inverse of the grouped list)."""
    expert, chunk = tl.program_id(0), tl.program_id(1)
    pair = chunk * CHUNK + tl.arange(0, CHUNK)
    ids = _plan_ids(ids_ptr, pair, pairs, EXPERTS)
    if COUNTED:  # the whole table in one load: a few thousand int32
        row = tl.arange(0, ROWS_POW2)[:, None]
        column = tl.arange(0, EXPERTS_POW2)[None, :]
        inside = (row < tl.num_programs(1)) & (column < EXPERTS)
        counts = tl.load(counts_ptr + row * EXPERTS + column, mask=inside, other=0)
        earlier = (column < expert) | ((column == expert) & (row < chunk))
        before = tl.sum(tl.sum(tl.where(earlier, counts, 0), axis=1), axis=0)
    else:
        before = tl.sum((ids < expert).to(tl.int32), axis=0)
    tl.store(plan_ptr + expert, before, mask=chunk == 0)
    tl.store(plan_ptr + EXPERTS, pairs, mask=(expert == EXPERTS - 1) & (chunk == 0))
    mine = (ids == expert).to(tl.int32)
    place = before + tl.cumsum(mine, axis=0) - 1
    tl.store(plan_ptr + EXPERTS + 1 + place, pair, mask=mine > 0)
    if SLOTS:
        tl.store(slots_ptr + pair, place, mask=mine > 0)


@triton.jit
def _plan_ids(ids_ptr, pair, pairs, EXPERTS: tl.constexpr):
    """The experts of ``pair``, clamped to real ones (an id outside them, a NaN token's, would
    belong to no program: its pair lost, the starts after it wrong); EXPERTS, which no program
    owns, past the table's end."""
    ids = tl.load(ids_ptr + pair, mask=pair < pairs, other=EXPERTS).to(tl.int32)
    return tl.where(pair < pairs, tl.minimum(tl.maximum(ids, 0), EXPERTS - 1), EXPERTS)


def pair_plan(ids: torch.Tensor, experts: int) -> torch.Tensor:
    """The top-k table (N, top_k) as the expert kernels read it SORTED: where each expert's
    pairs start (experts + 1 entries, the last the pair count), then the pair indices (rows
    of the flattened table) grouped by expert, in pair order within each. int32, on the
    device, with no host sync: a stable counting sort in one launch (a step's pairs) or two
    (a prefill's, see PLAN_CHUNK), where torch's argsort, histogram and scan took a dozen
    launches a layer (bench/RESULTS.md)."""
    return _planned(ids, experts, None)


def pair_plan_and_slots(ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``pair_plan``, and where each pair of the top-k table landed in the grouped list
    (int32, (N·top_k,)): the rows combine reads a pair from, in the same launch."""
    slots = torch.empty(ids.numel(), dtype=torch.int32, device=ids.device)
    return _planned(ids, experts, slots), slots


def _planned(ids: torch.Tensor, experts: int, slots: torch.Tensor | None) -> torch.Tensor:
    pairs = ids.numel()
    ids = ids.contiguous()
    plan = torch.empty(experts + 1 + pairs, dtype=torch.int32, device=ids.device)
    chunk = STEP_PLAN_CHUNK if pairs <= STEP_PLAN_CHUNK else PLAN_CHUNK
    chunks = max(triton.cdiv(pairs, chunk), 1)  # no pairs: one program an expert stores 0s
    counts = plan  # a placeholder the one-chunk launch never reads
    if chunks > 1:
        counts = torch.empty(chunks, experts, dtype=torch.int32, device=ids.device)
        _pair_counts[(experts, chunks)](ids, counts, pairs, EXPERTS=experts, CHUNK=chunk)
    _pair_plan[(experts, chunks)](
        ids,
        plan,
        plan if slots is None else slots,
        counts,
        pairs,
        EXPERTS=experts,
        CHUNK=chunk,
        COUNTED=chunks > 1,
        ROWS_POW2=max(COUNTS_ROWS, triton.next_power_of_2(chunks)),
        EXPERTS_POW2=triton.next_power_of_2(experts),
        SLOTS=slots is not None,
        num_warps=8,
    )
    return plan


@triton.jit
def _my_rows(
    ids_ptr,
    expert,
    block,
    tokens,
    TOP_K: tl.constexpr,
    PAIRS_POW2: tl.constexpr,
    ROUTED: tl.constexpr,
    ROWS: tl.constexpr,
    SORTED: tl.constexpr,
    EXPERTS: tl.constexpr,
):
    """This program's ROWS pairs: the block-th ROWS of those routed to ``expert`` (their index
    in the top-k table, and their token), or, unrouted (shared experts, dense MLP), tokens
    block·ROWS onward. Returns (pair, token, present, how many pairs the expert has).

    Routed, ``ids_ptr`` is the top-k table, scanned for the expert's pairs (a step of few
    tokens), or SORTED, pair_plan's table: where each expert's pairs start, then the pairs in
    expert order (a step of many tokens, by Tiles.plan, and a prefill's thousands, where a
    scan per program would dominate)."""
    want = block * ROWS + tl.arange(0, ROWS)
    if ROUTED:
        if SORTED:
            first = tl.load(ids_ptr + expert)
            count = tl.load(ids_ptr + expert + 1) - first
            present = want < count
            pair = tl.load(ids_ptr + EXPERTS + 1 + first + want, mask=present, other=0)
            return pair, pair // TOP_K, present, count
        p = tl.arange(0, PAIRS_POW2)
        mine = tl.load(ids_ptr + p, mask=p < tokens * TOP_K, other=-1) == expert
        count = tl.sum(mine.to(tl.int32), axis=0)
        rank = tl.cumsum(mine.to(tl.int32), axis=0) - 1
        match = (rank[None, :] == want[:, None]) & mine[None, :]  # (ROWS, pairs)
        pair = tl.sum(tl.where(match, p[None, :], 0), axis=1)
        return pair, pair // TOP_K, want < count, count
    return want, want, want < tokens, tokens


@triton.jit
def _gate_up_tile(
    h_ptr,
    weights,
    act_ptr,
    pair,
    token,
    present,
    tile,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    SWAP: tl.constexpr,
):
    """act[pair, n] = SiLU(h·Wgᵀ)·(h·Wuᵀ) for one tile of an MLP's intermediate columns.
    SWAP: the tile computed transposed, Wg·hᵀ, so that the weights' rows fill the MMA's M
    side (Hopper's warpgroup MMA wants M ≥ 64) and the few pairs its N side."""
    dtype = act_ptr.dtype.element_ty
    n = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    if SWAP:
        gate = tl.zeros((BLOCK_N, ROWS), tl.float32)
        up = tl.zeros((BLOCK_N, ROWS), tl.float32)
    else:
        gate = tl.zeros((ROWS, BLOCK_N), tl.float32)
        up = tl.zeros((ROWS, BLOCK_N), tl.float32)
    for start in range(0, HIDDEN, BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        x = tl.load(h_ptr + token[:, None] * HIDDEN + k[None, :], mask=present[:, None], other=0.0)
        w_gate = tl.load(weights + n[:, None] * HIDDEN + k[None, :])  # (BLOCK_N, BLOCK_K)
        w_up = tl.load(weights + (INTER + n[:, None]) * HIDDEN + k[None, :])
        if SWAP:
            gate = tl.dot(w_gate, tl.trans(x), gate, input_precision=PRECISION)
            up = tl.dot(w_up, tl.trans(x), up, input_precision=PRECISION)
        else:
            gate = tl.dot(x, tl.trans(w_gate), gate, input_precision=PRECISION)
            up = tl.dot(x, tl.trans(w_up), up, input_precision=PRECISION)
    act = silu_times_up(gate.to(dtype).to(tl.float32), up.to(dtype).to(tl.float32), dtype)
    if SWAP:
        tl.store(act_ptr + pair[None, :] * INTER + n[:, None], act, mask=present[None, :])
    else:
        tl.store(act_ptr + pair[:, None] * INTER + n[None, :], act, mask=present[:, None])


@triton.jit
def silu_times_up(gate, up, dtype: tl.constexpr):
    """SiLU(gate)·up as torch's two ops round them: gate and up are values of ``dtype`` held
    in fp32; the SiLU is rounded to ``dtype``, then the product."""
    silu = (gate / (1.0 + tl.exp(-gate))).to(dtype).to(tl.float32)
    return (silu * up).to(dtype)


@triton.jit
def _gate_up(
    h_ptr,
    ids_ptr,
    w_ptr,
    act_ptr,
    shared_w_ptr,
    shared_act_ptr,
    tokens,
    EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    SHARED_INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    PAIRS_POW2: tl.constexpr,
    SORTED: tl.constexpr,  # ids_ptr holds pair_plan's table, not the top-k table
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SHARED_BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    SWAP: tl.constexpr,
    WITH_ROUTED: tl.constexpr,
    WITH_UNROUTED: tl.constexpr,
):
    """Programs 0..EXPERTS-1 of axis 0: the routed experts, each over the pairs routed to it;
    program EXPERTS (when launched): the unrouted MLP (shared experts, dense MLP) over every
    token. Both kinds in one launch: the shared experts run beside the routed ones."""
    # WITH_*: a launch compiles only the MLPs it runs (both branches cost registers and
    # shared memory, and so occupancy, in every program).
    expert, block, tile = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if WITH_UNROUTED:  # noqa: SIM102 (a constexpr: the branch compiles out)
        if expert == EXPERTS:
            pair, token, present, count = _my_rows(
                ids_ptr, expert, block, tokens, TOP_K, PAIRS_POW2, False, ROWS, SORTED, EXPERTS
            )
            if block * ROWS < count and tile < SHARED_INTER // SHARED_BLOCK_N:
                _gate_up_tile(
                    h_ptr,
                    shared_w_ptr,
                    shared_act_ptr,
                    pair,
                    token,
                    present,
                    tile,
                    HIDDEN,
                    SHARED_INTER,
                    ROWS,
                    SHARED_BLOCK_N,
                    BLOCK_K,
                    PRECISION,
                    SWAP,
                )
    if WITH_ROUTED:  # noqa: SIM102 (a constexpr: the branch compiles out)
        if expert < EXPERTS:
            pair, token, present, count = _my_rows(
                ids_ptr, expert, block, tokens, TOP_K, PAIRS_POW2, True, ROWS, SORTED, EXPERTS
            )
            # Nothing routed here: this expert's weights are never read.
            if block * ROWS < count and tile < INTER // BLOCK_N:
                weights = w_ptr + expert.to(tl.int64) * (2 * INTER * HIDDEN)
                _gate_up_tile(
                    h_ptr,
                    weights,
                    act_ptr,
                    pair,
                    token,
                    present,
                    tile,
                    HIDDEN,
                    INTER,
                    ROWS,
                    BLOCK_N,
                    BLOCK_K,
                    PRECISION,
                    SWAP,
                )


@triton.jit
def _down_tile(
    act_ptr,
    weights,
    pair,
    present,
    tile,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    SWAP: tl.constexpr,
):
    """act[pair]·Wdᵀ for one tile of the hidden columns, rounded to the model's dtype,
    (ROWS, BLOCK_N) (SWAP: computed as Wd·actᵀ, see _gate_up_tile, and transposed back)."""
    n = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    if SWAP:  # noqa: SIM108 (a constexpr branch: each shape compiles alone)
        acc = tl.zeros((BLOCK_N, ROWS), tl.float32)
    else:
        acc = tl.zeros((ROWS, BLOCK_N), tl.float32)
    for start in range(0, INTER, BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        a = tl.load(act_ptr + pair[:, None] * INTER + k[None, :], mask=present[:, None], other=0.0)
        w = tl.load(weights + n[:, None] * INTER + k[None, :])
        if SWAP:
            acc = tl.dot(w, tl.trans(a), acc, input_precision=PRECISION)
        else:
            acc = tl.dot(a, tl.trans(w), acc, input_precision=PRECISION)
    if SWAP:
        rounded = tl.trans(acc.to(act_ptr.dtype.element_ty))
    else:
        rounded = acc.to(act_ptr.dtype.element_ty)
    return rounded, n


@triton.jit
def _down(
    act_ptr,
    ids_ptr,
    topk_weights_ptr,
    w_ptr,
    out_ptr,
    shared_act_ptr,
    shared_w_ptr,
    shared_out_ptr,
    tokens,
    EXPERTS: tl.constexpr,
    HIDDEN: tl.constexpr,
    INTER: tl.constexpr,
    SHARED_INTER: tl.constexpr,
    TOP_K: tl.constexpr,
    PAIRS_POW2: tl.constexpr,
    SORTED: tl.constexpr,  # ids_ptr holds pair_plan's table, not the top-k table
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SHARED_BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    SWAP: tl.constexpr,
    WITH_ROUTED: tl.constexpr,
    WITH_UNROUTED: tl.constexpr,
):
    """Routed: out[pair] = round(act[pair]·Wd[e]ᵀ) times the pair's weight, in fp32.
    Unrouted (program EXPERTS): shared_out[token] = round(act[token]·Wdᵀ)."""
    expert, block, tile = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if WITH_UNROUTED:  # noqa: SIM102 (a constexpr: the branch compiles out)
        if expert == EXPERTS:
            pair, token, present, count = _my_rows(
                ids_ptr, expert, block, tokens, TOP_K, PAIRS_POW2, False, ROWS, SORTED, EXPERTS
            )
            if block * ROWS < count:
                y, n = _down_tile(
                    shared_act_ptr,
                    shared_w_ptr,
                    pair,
                    present,
                    tile,
                    HIDDEN,
                    SHARED_INTER,
                    ROWS,
                    BLOCK_N,
                    SHARED_BLOCK_K,
                    PRECISION,
                    SWAP,
                )
                target = shared_out_ptr + token[:, None] * HIDDEN + n[None, :]
                tl.store(target, y, mask=present[:, None])
    if WITH_ROUTED:  # noqa: SIM102 (a constexpr: the branch compiles out)
        if expert < EXPERTS:
            pair, token, present, count = _my_rows(
                ids_ptr, expert, block, tokens, TOP_K, PAIRS_POW2, True, ROWS, SORTED, EXPERTS
            )
            if block * ROWS < count:
                weights = w_ptr + expert.to(tl.int64) * (HIDDEN * INTER)
                y, n = _down_tile(
                    act_ptr,
                    weights,
                    pair,
                    present,
                    tile,
                    HIDDEN,
                    INTER,
                    ROWS,
                    BLOCK_N,
                    BLOCK_K,
                    PRECISION,
                    SWAP,
                )
                weight = tl.load(topk_weights_ptr + pair, mask=present, other=0.0)
                out = y.to(tl.float32) * weight[:, None]
                tl.store(out_ptr + pair[:, None] * HIDDEN + n[None, :], out, mask=present[:, None])


@triton.jit
def _combine(
    routed_ptr,
    slots_ptr,
    pair_weights_ptr,
    shared_ptr,
    x_ptr,
    norm_weight_ptr,
    summed_ptr,
    out_ptr,
    eps,
    HIDDEN: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK: tl.constexpr,
    ADD_NORM: tl.constexpr,
    GATHERED: tl.constexpr,
):
    """The layer's output, round(Σ_k routed[t, k]) + shared[t], as transformers sums and adds
    them. ADD_NORM: then the residual add and the next RMSNorm, as triton_kernels.add_rms_norm
    rounds them, so the output never makes a round trip through memory. GATHERED: routed holds
    the experts' unweighted rows in the grouped order; pair t·TOP_K + k is row slots[...] times
    its fp32 weight, the product rounded to fp32 (launched without FMA contraction) as the
    weighted pairs were."""
    n = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    inside = columns < HIDDEN
    dtype = out_ptr.dtype.element_ty
    total = tl.zeros((BLOCK,), tl.float32)
    for choice in tl.static_range(TOP_K):
        if GATHERED:
            slot = tl.load(slots_ptr + n * TOP_K + choice).to(tl.int64)
            weight = tl.load(pair_weights_ptr + n * TOP_K + choice)
            row = tl.load(routed_ptr + slot * HIDDEN + columns, mask=inside, other=0.0)
            total += row.to(tl.float32) * weight
        else:
            total += tl.load(
                routed_ptr + (n * TOP_K + choice) * HIDDEN + columns, mask=inside, other=0.0
            )
    shared = tl.load(shared_ptr + n * HIDDEN + columns, mask=inside, other=0.0).to(tl.float32)
    delta = (total.to(dtype).to(tl.float32) + shared).to(dtype)
    if ADD_NORM:
        x = tl.load(x_ptr + n * HIDDEN + columns, mask=inside, other=0.0).to(tl.float32)
        residual_rms_norm(
            x,
            delta.to(tl.float32),
            norm_weight_ptr,
            summed_ptr,
            out_ptr,
            n,
            columns,
            inside,
            eps,
            HIDDEN,
            True,
        )
    else:
        tl.store(out_ptr + n * HIDDEN + columns, delta, mask=inside)


def expert_mlp(
    h: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    ids: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    tiles: Tiles | None = None,
) -> torch.Tensor:
    """SiLU-gated MLPs over stacked weights: gate_up (E, 2·I, hidden) with the gate rows first,
    down (E, hidden, I). Routed (ids, weights: (N, top_k)): each token through its chosen
    experts, returned per pair in fp32, (N·top_k, hidden), weighted. Unrouted: every token
    through the one MLP (E = 1), returned (N, hidden) in h's dtype."""
    if ids is None:
        return _launch(h, tiles, unrouted=(gate_up, down))[1]
    assert weights is not None
    return _launch(h, tiles, routed=(gate_up, down, ids, weights))[0]


def moe_experts(
    h: torch.Tensor,
    routed: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    shared: tuple[torch.Tensor, torch.Tensor],
    tiles: Tiles | None = None,
    split_gate_up: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The routed experts (gate_up, down, ids, weights, as ``expert_mlp``) and the shared ones
    (gate_up, down) in the same two launches (split_gate_up: the gate/up in a launch each, the
    down in one): (N·top_k, hidden) fp32 pairs, (N, hidden)."""
    routed_out, shared_out = _launch(h, tiles, routed, shared, split_gate_up)
    return routed_out, shared_out


def _launch(
    h: torch.Tensor,
    tiles: Tiles | None,
    routed: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    unrouted: tuple[torch.Tensor, torch.Tensor] | None = None,
    split_gate_up: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both expert kernels over the routed experts (axis 0's first programs) and the unrouted
    MLP (its last), either of them absent; what is absent comes back as ``h``."""
    count, hidden = h.shape
    x = h.contiguous()
    experts, inter, top_k = 0, 0, 1
    gate_up = down = ids = weights = act = out = x  # placeholders the kernels never touch
    if routed is not None:
        gate_up, down, ids, weights = routed
        experts, inter, top_k = down.shape[0], down.shape[2], ids.shape[1]
        act = torch.empty(count * top_k, inter, device=h.device, dtype=h.dtype)
        out = torch.empty(count * top_k, hidden, device=h.device, dtype=torch.float32)
    shared_gate_up = shared_down = shared_act = shared_out = x
    shared_inter = inter
    if unrouted is not None:
        shared_gate_up, shared_down = unrouted
        shared_inter = shared_down.shape[2]
        shared_act = torch.empty(count, shared_inter, device=h.device, dtype=h.dtype)
        shared_out = torch.empty(count, hidden, device=h.device, dtype=h.dtype)
    inter = inter or shared_inter
    rows = rows_per_program(count)
    tiles = tiles or tiles_for(count)
    sort = routed is not None and (count > SORT_PAIRS_ABOVE or tiles.plan)
    if sort:
        ids = pair_plan(ids, experts)
    common: dict[str, Any] = dict(
        EXPERTS=experts,
        HIDDEN=hidden,
        INTER=inter,
        SHARED_INTER=shared_inter,
        TOP_K=top_k,
        PAIRS_POW2=1 if sort else triton.next_power_of_2(count * top_k),
        SORTED=sort,
        ROWS=rows,
        PRECISION=dot_precision(h.dtype),
        SWAP=tiles.swap,
    )
    blocks = triton.cdiv(count, rows)  # an expert has at most one pair per token
    launch = dict(num_warps=tiles.warps, num_stages=tiles.stages)
    # Each MLP keeps its own tile widths; axis 2 is as long as the wider MLP needs.
    gate_up_widths, down_widths = tile_widths(hidden, inter, shared_inter, tiles)
    block_n, shared_block_n = gate_up_widths["BLOCK_N"], gate_up_widths["SHARED_BLOCK_N"]

    def launch_gate_up(with_routed: bool, with_unrouted: bool) -> None:
        mine = experts if with_routed else 0  # the unrouted MLP is program `mine` of axis 0
        columns = max(
            inter // block_n if with_routed else 0,
            shared_inter // shared_block_n if with_unrouted else 0,
        )
        _gate_up[(mine + with_unrouted, blocks, columns)](
            x,
            ids,
            gate_up,
            act,
            shared_gate_up,
            shared_act,
            count,
            **gate_up_widths,
            **{**common, "EXPERTS": mine},
            WITH_ROUTED=with_routed,
            WITH_UNROUTED=with_unrouted,
            **launch,
        )

    has_routed, has_unrouted = routed is not None, unrouted is not None
    if split_gate_up and has_routed and has_unrouted:
        launch_gate_up(True, False)
        launch_gate_up(False, True)
    else:
        launch_gate_up(has_routed, has_unrouted)
    _down[(experts + has_unrouted, blocks, hidden // down_widths["BLOCK_N"])](
        act,
        ids,
        weights,
        down,
        out,
        shared_act,
        shared_down,
        shared_out,
        count,
        **down_widths,
        **common,
        WITH_ROUTED=has_routed,
        WITH_UNROUTED=has_unrouted,
        **launch,
    )
    return out, shared_out


def combine(routed: torch.Tensor, shared: torch.Tensor, top_k: int) -> torch.Tensor:
    """routed: (N·top_k, hidden) fp32 weighted pairs; shared: (N, hidden). Returns (N, hidden)."""
    out = torch.empty_like(shared)
    _combine_launch(routed, shared.contiguous(), top_k, out)
    return out


def combine_add_rms_norm(
    routed: torch.Tensor,
    shared: torch.Tensor,
    top_k: int,
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    gathered: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``combine``, added to the residual stream x and normalised in the same kernel: returns
    (x + layer output, RMSNorm of it), as triton_kernels.add_rms_norm(x, combine(...)).
    ``gathered``: (slots, weights) of pair_plan_and_slots and the router, routed being the
    experts' unweighted rows in the grouped order (grouped_experts.py): each pair weighed as
    it is read, with no fp32 table of weighted pairs written and read back."""
    summed, out = torch.empty_like(shared), torch.empty_like(shared)
    add_norm = (x.contiguous(), weight, eps, summed)
    _combine_launch(routed, shared.contiguous(), top_k, out, add_norm, gathered)
    return summed, out


def _combine_launch(
    routed: torch.Tensor,
    shared: torch.Tensor,
    top_k: int,
    out: torch.Tensor,
    add_norm: tuple[torch.Tensor, torch.Tensor, float, torch.Tensor] | None = None,
    gathered: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    count, hidden = shared.shape
    x, weight, eps, summed = add_norm or (shared, shared, 0.0, out)
    slots, pair_weights = gathered or (routed, routed)
    _combine[(count,)](
        routed,
        slots,
        pair_weights.contiguous(),
        shared,
        x,
        weight,
        summed,
        out,
        eps,
        HIDDEN=hidden,
        TOP_K=top_k,
        BLOCK=triton.next_power_of_2(hidden),
        ADD_NORM=add_norm is not None,
        GATHERED=gathered is not None,
        enable_fp_fusion=gathered is None,
    )


def tiles_fit(hidden: int, inter: int) -> bool:
    """Whether these kernels' tiles divide the projections' sizes (they do for v1 and the tiny
    test model); the caller keeps the torch ops otherwise."""
    return all(size % 16 == 0 for size in (hidden, inter))


def tile_widths(
    hidden: int, inter: int, shared_inter: int, tiles: Tiles
) -> tuple[dict[str, int], dict[str, int]]:
    """The tile widths the gate/up and the down kernel are launched with."""
    gate_up = dict(
        BLOCK_N=_tile(inter, tiles.gate_up_n),
        SHARED_BLOCK_N=_tile(shared_inter, tiles.gate_up_n),
        BLOCK_K=_tile(hidden, tiles.k),
    )
    down = dict(
        BLOCK_N=_tile(hidden, tiles.down_n),
        BLOCK_K=_tile(inter, tiles.k),
        SHARED_BLOCK_K=_tile(shared_inter, tiles.k),
    )
    return gate_up, down


def _tile(size: int, largest: int) -> int:
    """The largest of 128, 64, 32, 16 (up to ``largest``) that divides ``size``."""
    return next(t for t in (128, 64, 32, 16) if t <= largest and size % t == 0)
