"""The decoder's MoE layers for the decode step: after routing (kernels/routing.py), three
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

from typing import Any

import torch
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels.decode_attention import dot_precision
from ocr_worker.engines.unlimited_ocr.kernels.moe_programs import (
    combine_kernel,
    down_kernel,
    gate_up_kernel,
)
from ocr_worker.engines.unlimited_ocr.kernels.tuning import (
    DEFAULT_CARD,
    Tiles,
    card_name,
    tuning_for,
)

# Above this many tokens a launch is a prefill's: the expert kernels read pair_plan's table
# rather than scanning the top-k table in every program (a scan of 13k pairs per program at a
# prefill's 2,185 tokens), whatever the tiles say, and take PREFILL_TILES.
SORT_PAIRS_ABOVE = 256

# A step of up to this many sequences takes the card's few-token tiles (tuning.py).
FEW_TOKENS = 32


def tiles_for(tokens: int, card: str = DEFAULT_CARD) -> Tiles:
    """The tiles of a launch over ``tokens`` rows on ``card`` (card_name), by the regimes
    above: a step of few sequences, one of many, a prefill's."""
    tuning = tuning_for(card)
    if tokens <= FEW_TOKENS:
        return tuning.moe_few_tokens
    return tuning.moe_many_tokens if tokens <= SORT_PAIRS_ABOVE else tuning.moe_prefill


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
# expert looped over every chunk twice: 95 µs a layer for a pass on an H100, a group's 150 µs
# (bench/RESULTS.md, "GPU engine: kernels": the pair plan). Every size a few compiles: two
# chunk widths, and a counts table of at least COUNTS_ROWS chunks (a pass of 16,384 rows has
# 24).
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
    tiles = tiles or tiles_for(count, card_name(h.device))
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
        gate_up_kernel[(mine + with_unrouted, blocks, columns)](
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
    down_kernel[(experts + has_unrouted, blocks, hidden // down_widths["BLOCK_N"])](
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
    (x + layer output, RMSNorm of it), as norms.add_rms_norm(x, combine(...)).
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
    combine_kernel[(count,)](
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
