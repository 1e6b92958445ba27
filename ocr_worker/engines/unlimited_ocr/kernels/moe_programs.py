"""The expert kernels' programs (Triton; GPU, or Triton's interpreter in tests), launched by
moe.py: the gate/up projections with SiLU, the down projections, and the weighted sum with the
shared experts, which also adds the layer's output to the residual stream and applies the next
RMSNorm. Each program finds the pairs (token, choice) routed to its expert by itself, from the
top-k table or from pair_plan's table (SORTED), and skips the work when there are none.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels.norms import residual_rms_norm


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
def gate_up_kernel(
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
def down_kernel(
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
def combine_kernel(
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
    them. ADD_NORM: then the residual add and the next RMSNorm, as norms.add_rms_norm
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
