"""A MoE layer's routing for the decode step in Triton (GPU, or Triton's interpreter in tests):
each token's fp32 router logits, their softmax, and the top-k experts with their weights, as
transformers' fp32 router GEMM, softmax and top-k give them (the lowest index on a tie). The
expert kernels (kernels/moe.py) read the top-k table on the GPU: no host sync, no sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

# Above this many tokens a launch is a prefill's, for the routing as for the experts' kernels
from ocr_worker.engines.unlimited_ocr.kernels.moe import SORT_PAIRS_ABOVE


@triton.jit
def _router_logits(
    h_ptr,
    w_ptr,
    logits_ptr,
    HIDDEN: tl.constexpr,
    EXPERTS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """GROUP experts' fp32 logits for one token: many small programs, as one token's router
    weights (E·hidden fp32) read by a single program took 23 µs."""
    n, g = tl.program_id(0), tl.program_id(1)
    e = g * GROUP + tl.arange(0, GROUP)
    real = e < EXPERTS
    logits = tl.zeros((GROUP,), tl.float32)
    for start in range(0, HIDDEN, BLOCK):
        k = start + tl.arange(0, BLOCK)
        inside = k < HIDDEN
        x = tl.load(h_ptr + n * HIDDEN + k, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(
            w_ptr + e[:, None] * HIDDEN + k[None, :],
            mask=real[:, None] & inside[None, :],
            other=0.0,
        ).to(tl.float32)
        logits += tl.sum(w * x[None, :], axis=1)
    tl.store(logits_ptr + n * EXPERTS + e, logits, mask=real)


@triton.jit
def _top_k(
    logits_ptr,
    ids_ptr,
    weights_ptr,
    scale,
    EXPERTS: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
    TOP_K: tl.constexpr,
):
    """One token: softmax over the logits, the TOP_K largest (lowest index on a tie)."""
    n = tl.program_id(0) + tl.arange(0, 1)
    e = tl.arange(0, EXPERTS_POW2)
    real_e = e < EXPERTS
    logits = tl.load(logits_ptr + n[:, None] * EXPERTS + e[None, :], mask=real_e[None, :])
    _store_top_k(
        logits, n, n >= 0, e, real_e, ids_ptr, weights_ptr, scale, TOP_K, EXPERTS, EXPERTS_POW2
    )


@triton.jit
def _store_top_k(
    logits, n, real_n, e, real_e, ids_ptr, weights_ptr, scale, TOP_K, EXPERTS, EXPERTS_POW2
):
    """Tokens ``n`` (rows of ``logits``, fp32 (rows, EXPERTS_POW2)): the softmax over the real
    experts, then the TOP_K largest (the lowest index on a tie) and their probability times
    ``scale``, into the top-k tables."""
    logits = tl.where(real_e[None, :], logits, float("-inf"))
    p = tl.exp(logits - tl.max(logits, axis=1)[:, None])
    p = tl.where(real_e[None, :], p / tl.sum(p, axis=1)[:, None], -1.0)
    for choice in tl.static_range(TOP_K):
        best = tl.max(p, axis=1)
        index = tl.min(tl.where(p == best[:, None], e[None, :], EXPERTS_POW2), axis=1)
        # A NaN row (an overflow upstream) matches no expert: a real one, never past the last
        index = tl.minimum(index, EXPERTS - 1)
        tl.store(ids_ptr + n * TOP_K + choice, index, mask=real_n)
        tl.store(weights_ptr + n * TOP_K + choice, best * scale, mask=real_n)
        p = tl.where(e[None, :] == index[:, None], -1.0, p)


@triton.jit
def _route_rows(
    h_ptr,
    w_ptr,
    ids_ptr,
    weights_ptr,
    scale,
    tokens,
    HIDDEN: tl.constexpr,
    EXPERTS: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,  # at least 16, tl.dot's least N
    TOP_K: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """_router_logits and _top_k in one program per ROWS tokens: every expert's fp32 logit of
    a token in one tl.dot tile (the router's weights' loads pipelined by Triton, as they feed
    tl.dot; PRECISION tf32x3: three tensor-core products that keep fp32's precision, as the
    model's fp32 router GEMM does), then the top-k as _top_k takes it."""
    n = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    real_n = n < tokens
    e = tl.arange(0, EXPERTS_POW2)
    real_e = e < EXPERTS
    logits = tl.zeros((ROWS, EXPERTS_POW2), tl.float32)
    for start in range(0, HIDDEN, BLOCK):
        k = start + tl.arange(0, BLOCK)
        inside = k < HIDDEN
        x = tl.load(
            h_ptr + n[:, None] * HIDDEN + k[None, :],
            mask=real_n[:, None] & inside[None, :],
            other=0.0,
        ).to(tl.float32)
        w = tl.load(
            w_ptr + e[None, :] * HIDDEN + k[:, None],
            mask=real_e[None, :] & inside[:, None],
            other=0.0,
        ).to(tl.float32)
        logits += tl.dot(x, w, input_precision=PRECISION)
    _store_top_k(
        logits, n, real_n, e, real_e, ids_ptr, weights_ptr, scale, TOP_K, EXPERTS, EXPERTS_POW2
    )


@dataclass(frozen=True)
class RouterLaunch:
    """How routing is launched. ``fused``: logits, softmax and top-k in one program per
    ``rows`` tokens (_route_rows; at least 16, tl.dot's least M), ``block`` columns of hidden a
    step with ``stages`` of them in flight;
    else _router_logits with ``group`` experts a program and ``block`` columns a load (None:
    the whole row), then _top_k. bench/engine/mlp_bench.py times them: one token's routing is µs of
    latency (one program streams the router's 327 KB when fused) and a launch between the
    two kernels when split, not bytes."""

    fused: bool = True
    block: int | None = 64
    group: int = 8
    stages: int = 3
    rows: int = 16


FUSED = RouterLaunch()
FUSED_WIDE = RouterLaunch(rows=64)
SPLIT_NARROW = RouterLaunch(fused=False, group=2, block=None)
SPLIT_WIDE = RouterLaunch(fused=False, group=8, block=None)


def router_for(tokens: int) -> RouterLaunch:
    """Measured on the H200 (bench/engine/mlp_bench.py; whole steps on an H100, 0.93 ms against 1.04
    at one sequence; bench/RESULTS.md, "GPU engine: kernels"): a decode step's
    routing in two launches, the logits with whole rows of h, 2 experts a program up to 16
    tokens (4.8 / 5.1 µs a layer at 1 / 16 against the fused kernel's 15.7), 8 at 128 (8.9
    against 15.8: fewer programs re-reading h); a step of more in the fused kernel, 16 tokens
    a program; a prefill's thousands (above SORT_PAIRS_ABOVE) 64 tokens a program, so the
    router's rows are read once per 64 (H100, 2026-12-06: 42.4 µs a layer
    at a pass's 15,295 tokens, against 82.5 at 16 a program and 79.7 at 128,
    bench/engine/pass_kernels_bench.py). Not timed between 129 and 256 tokens: 64 a program would
    leave those steps 3 or 4 programs, so they keep 16."""
    if tokens <= 16:
        return SPLIT_NARROW
    if tokens <= 128:
        return SPLIT_WIDE
    return FUSED if tokens <= SORT_PAIRS_ABOVE else FUSED_WIDE


def route(
    h: torch.Tensor,
    router: torch.Tensor,
    top_k: int,
    scale: float,
    launch: RouterLaunch | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """h: (N, hidden); router: (E, hidden). Returns the chosen experts (N, top_k) int32 and
    their softmax probabilities times ``scale`` (N, top_k) fp32."""
    count, hidden = h.shape
    experts = router.shape[0]
    ids = torch.empty(count, top_k, device=h.device, dtype=torch.int32)
    weights = torch.empty(count, top_k, device=h.device, dtype=torch.float32)
    launch = launch or router_for(count)
    h = h.contiguous()
    if launch.fused:
        rows = launch.rows
        _route_rows[(triton.cdiv(count, rows),)](
            h,
            router,
            ids,
            weights,
            scale,
            count,
            HIDDEN=hidden,
            EXPERTS=experts,
            EXPERTS_POW2=max(16, triton.next_power_of_2(experts)),
            TOP_K=top_k,
            ROWS=rows,
            BLOCK=launch.block or 64,
            # tf32 alone would round the fp32 router's weights to 10 bits; the interpreter
            # (fp32 tests) takes "ieee"
            PRECISION="ieee" if h.dtype == torch.float32 else "tf32x3",
            num_stages=launch.stages,
        )
        return ids, weights
    logits = torch.empty(count, experts, device=h.device, dtype=torch.float32)
    row = triton.next_power_of_2(hidden)
    _router_logits[(count, triton.cdiv(experts, launch.group))](
        h,
        router,
        logits,
        HIDDEN=hidden,
        EXPERTS=experts,
        GROUP=launch.group,
        BLOCK=min(launch.block or row, row),
    )
    _top_k[(count,)](
        logits,
        ids,
        weights,
        scale,
        EXPERTS=experts,
        EXPERTS_POW2=triton.next_power_of_2(experts),
        TOP_K=top_k,
    )
    return ids, weights
