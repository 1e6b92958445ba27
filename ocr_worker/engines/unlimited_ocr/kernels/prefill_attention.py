"""A prefill pass's attention in one Triton launch a layer (GPU, or Triton's interpreter in
tests): each part's new rows over its own rows, causal aligned to the last key, reading K and V
from the layer's block pool through the pass's row table.

torch's varlen flash attention (FA2, PrefillPass._flash) takes each part's keys packed, so a
layer first gathers K and V out of the pool (~100 µs a group of a pass on an H100), and then
runs at ~250 TFLOP/s (~590 µs a group; bench/RESULTS.md, "GPU engine: kernels"). Here no
gathered copy is written: a program takes BLOCK_M queries of one head of one part and streams
that part's keys through the row table, as paged_decode_attention does for a step. Its
arithmetic is flash attention's: fp32 scores and online softmax in base 2, p rounded to K/V's
dtype for the second product. Its tile is the card's (tuning.py).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels.decode_attention import dot_precision
from ocr_worker.engines.unlimited_ocr.kernels.tuning import PrefillTile, card_name, tuning_for


# One compile a tile: a pass's count of query blocks and where its bounds start in memory
# (16-byte aligned or not, by the pass's parts) would each make a compile of their own, a
# second or more of the worker's host, the card waiting, at the first pass of each kind.
@triton.jit(do_not_specialize=["blocks"], do_not_specialize_on_alignment=["k_bounds_ptr"])
def _prefill_attention(
    q_ptr,
    k_ptr,
    v_ptr,
    rows_ptr,
    q_bounds_ptr,
    k_bounds_ptr,
    out_ptr,
    scale_log2,
    blocks,
    HEADS: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # The last query blocks first: under a causal mask they see the most keys, and a wave's
    # long programs then start before its short ones instead of trailing after them.
    block, h, part = blocks - 1 - tl.program_id(0), tl.program_id(1), tl.program_id(2)
    q_start = tl.load(q_bounds_ptr + part)
    q_count = tl.load(q_bounds_ptr + part + 1) - q_start
    if block * BLOCK_M < q_count:
        k_start = tl.load(k_bounds_ptr + part)
        k_count = tl.load(k_bounds_ptr + part + 1) - k_start
        shift = k_count - q_count  # query i sees keys j <= i + shift: its past rows, then causal
        m = block * BLOCK_M + tl.arange(0, BLOCK_M)
        d = tl.arange(0, DIM)
        at = (q_start + m)[:, None] * (HEADS * DIM) + h * DIM + d[None, :]
        asked = (m < q_count)[:, None]
        q = tl.load(q_ptr + at, mask=asked, other=0.0)
        acc = tl.zeros((BLOCK_M, DIM), tl.float32)
        best = tl.full((BLOCK_M,), -1e30, tl.float32)  # finite: no NaN from a row of -inf
        total = tl.zeros((BLOCK_M,), tl.float32)
        rows = rows_ptr + k_start
        k_head, v_head = k_ptr + h * DIM, v_ptr + h * DIM
        # Keys every query of the block sees, in whole tiles, need no mask; the rest up to the
        # block's last query's keys do.
        seen_by_all = tl.maximum(tl.minimum(block * BLOCK_M + shift + 1, k_count), 0)
        unmasked = seen_by_all // BLOCK_N * BLOCK_N
        end = tl.minimum((block + 1) * BLOCK_M + shift, k_count)
        acc, best, total = _over_keys(
            acc, best, total, q, m, k_head, v_head, rows, 0, unmasked, shift, scale_log2,
            HEADS, DIM, BLOCK_N, PRECISION, False,
        )  # fmt: skip
        acc, best, total = _over_keys(
            acc, best, total, q, m, k_head, v_head, rows, unmasked, end, shift, scale_log2,
            HEADS, DIM, BLOCK_N, PRECISION, True,
        )  # fmt: skip
        out = acc / total[:, None]
        tl.store(out_ptr + at, out.to(out_ptr.dtype.element_ty), mask=asked)


@triton.jit
def _over_keys(
    acc,
    best,
    total,
    q,
    m,
    k_head,
    v_head,
    rows,
    start,
    end,
    shift,
    scale_log2,
    HEADS: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
    MASKED: tl.constexpr,
):
    """The online softmax over keys [start, end) of the part. A masked tile's keys past
    ``end`` read pool row 0 (real memory) and count for nothing: their scores are set to
    -inf and their values read as zeros, whatever row 0 holds."""
    d = tl.arange(0, DIM)
    for first in range(start, end, BLOCK_N):
        n = first + tl.arange(0, BLOCK_N)
        row = tl.load(rows + n, mask=n < end, other=0)
        offsets = row[:, None] * (HEADS * DIM) + d[None, :]
        k = tl.load(k_head + offsets)
        scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
        if MASKED:  # n < end too: a padded query row past the part's last sees up to end
            seen = (n[None, :] <= m[:, None] + shift) & (n < end)[None, :]
            scores = tl.where(seen, scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, axis=1))
        shrink = tl.math.exp2(best - new_best)
        p = tl.math.exp2(scores - new_best[:, None])
        if MASKED:
            v = tl.load(v_head + offsets, mask=(n < end)[:, None], other=0.0)
        else:
            v = tl.load(v_head + offsets)
        total = total * shrink + tl.sum(p, axis=1)
        acc = acc * shrink[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        best = new_best
    return acc, best, total


def paged_prefill_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    rows: torch.Tensor,
    bounds: tuple[torch.Tensor, torch.Tensor],
    most_queries: int,
    tile: PrefillTile | None = None,
) -> torch.Tensor:
    """q: (T, H, D), every part's new rows in turn; k_pool/v_pool: (pool rows, H, D) of one
    layer; rows: every part's rows, one part after another (its past rows, then its new ones);
    bounds: int32 (parts + 1,) where each part's queries, and rows, start; most_queries: the
    most queries of any part. Returns (T, H, D): each query over its part's rows up to its own.
    ``tile``: by default the card's (tuning.py)."""
    tokens, heads, dim = q.shape
    if k_pool.stride(0) != heads * dim or v_pool.stride(0) != heads * dim:
        raise ValueError("the pool's rows must be whole: (pool rows, H, D), contiguous")
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if tokens == 0:
        return out
    tile = tile or tuning_for(card_name(q.device)).prefill_attention
    blocks = triton.cdiv(most_queries, tile.queries)
    parts = bounds[0].numel() - 1
    _prefill_attention[(blocks, heads, parts)](
        q.contiguous(),
        k_pool,
        v_pool,
        rows,
        bounds[0],
        bounds[1],
        out,
        dim**-0.5 * math.log2(math.e),
        blocks,
        HEADS=heads,
        DIM=dim,
        BLOCK_M=tile.queries,
        BLOCK_N=tile.keys,
        PRECISION=dot_precision(q.dtype),
        num_warps=tile.warps,
        num_stages=tile.stages,
    )
    return out
