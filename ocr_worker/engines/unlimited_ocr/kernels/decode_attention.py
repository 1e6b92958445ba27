"""The decode step's attention over the block pool (Triton; GPU, or Triton's interpreter in
tests).

The profile of the step as plain torch ops (bench/engine/step_profile.py) showed where the time
goes: at 128 sequences, copying every sequence's ~2,300 KV rows out of the block pool so that SDPA
can read them (10 ms of 19), then SDPA with a mask (4 ms).

``paged_decode_attention`` reads K/V straight from the pool through the row table, one program
per (sequence, head, slice of rows), with an online softmax ("flash decoding"); a second kernel
merges the slices. No gathered copy is ever written. Its tile and program count come from the
card's table (tuning.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels.tuning import (
    AttentionPlan,
    Tile,
    card_name,
    tuning_for,
)

ROW_GRAIN = 16  # a slice's rows are a multiple of this
QUERY_ROWS = tl.constexpr(16)  # the least M a tensor-core product takes: the query, padded


def plans_for(card: str) -> tuple[AttentionPlan, ...]:
    """The plans measured on ``card`` (card_name), or the H200's for a card not listed."""
    return tuning_for(card).attention


def attention_plan(batch: int, card: str) -> AttentionPlan:
    """The plan measured on ``card`` (card_name) for a step of ``batch`` sequences."""
    for plan in plans_for(card):
        if batch <= plan.up_to:
            return plan
    raise ValueError(f"{card}'s attention plans end below {batch} sequences (end them at ANY)")


@triton.jit
def _attention_slices(
    q_ptr,
    k_ptr,
    v_ptr,
    rows_ptr,
    valid_ptr,
    part_ptr,
    width,
    scale,
    CHUNK: tl.constexpr,  # rows per slice (a constant: one compile per captured shape)
    HEADS: tl.constexpr,
    DIM: tl.constexpr,
    SLICES: tl.constexpr,
    PRECISION: tl.constexpr,  # dot_precision
    BLOCK: tl.constexpr,
    MMA: tl.constexpr,
):
    b, h, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    query = q_ptr + (b * HEADS + h) * DIM
    rows = rows_ptr + b * width
    valid = valid_ptr + b * width
    k_head, v_head = k_ptr + h * DIM, v_ptr + h * DIM
    start = s * CHUNK
    end = tl.minimum(start + CHUNK, width)
    if MMA:
        acc, best, total = _slice_on_tensor_cores(
            query,
            k_head,
            v_head,
            rows,
            valid,
            start,
            end,
            scale,
            CHUNK,
            HEADS,
            DIM,
            BLOCK,
            PRECISION,
        )
    else:
        acc, best, total = _slice_on_cuda_cores(
            query, k_head, v_head, rows, valid, start, end, scale, CHUNK, HEADS, DIM, BLOCK
        )
    base = ((b * HEADS + h) * SLICES + s) * (DIM + 2)
    tl.store(part_ptr + base + tl.arange(0, DIM), acc)
    tl.store(part_ptr + base + DIM, best)
    tl.store(part_ptr + base + DIM + 1, total)


@triton.jit
def _slice_on_cuda_cores(
    query, k_head, v_head, rows, valid, start, end, scale, CHUNK, HEADS, DIM, BLOCK
):
    """One head's online softmax over rows [start, end): (acc (DIM,), best, total), fp32."""
    d = tl.arange(0, DIM)
    q = tl.load(query + d).to(tl.float32) * scale
    best = tl.full((), -1e30, tl.float32)  # finite: a slice with no valid row stays NaN-free
    total = tl.zeros((), tl.float32)
    acc = tl.zeros((DIM,), tl.float32)
    for offset in range(0, CHUNK, BLOCK):  # the last tile may reach past the slice: masked
        columns = start + offset + tl.arange(0, BLOCK)
        inside = columns < end
        row = tl.load(rows + columns, mask=inside, other=0)
        ok = tl.load(valid + columns, mask=inside, other=0) != 0
        offsets = row[:, None] * (HEADS * DIM) + d[None, :]
        k = tl.load(k_head + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
        scores = tl.where(ok, tl.sum(k * q[None, :], axis=1), float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, axis=0))
        shrink = tl.exp(best - new_best)
        p = tl.exp(scores - new_best)
        v = tl.load(v_head + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
        total = total * shrink + tl.sum(p, axis=0)
        acc = acc * shrink + tl.sum(p[:, None] * v, axis=0)
        best = new_best
    return acc, best, total


@triton.jit
def _slice_on_tensor_cores(
    query, k_head, v_head, rows, valid, start, end, scale, CHUNK, HEADS, DIM, BLOCK, PRECISION
):
    """The same as _slice_on_cuda_cores through tl.dot: row 0 of QUERY_ROWS holds the query,
    the rest zeros; p is rounded to K/V's dtype for the second product, as flash attention
    rounds it. Only row 0 of the result is returned."""
    d = tl.arange(0, DIM)
    m = tl.arange(0, QUERY_ROWS)
    first = m == 0
    q = tl.load(query + m[:, None] * 0 + d[None, :], mask=first[:, None], other=0.0)
    best = tl.full((QUERY_ROWS,), -1e30, tl.float32)
    total = tl.zeros((QUERY_ROWS,), tl.float32)
    acc = tl.zeros((QUERY_ROWS, DIM), tl.float32)
    for offset in range(0, CHUNK, BLOCK):
        columns = start + offset + tl.arange(0, BLOCK)
        inside = columns < end
        row = tl.load(rows + columns, mask=inside, other=0)
        ok = tl.load(valid + columns, mask=inside, other=0) != 0
        k = tl.load(k_head + row[None, :] * (HEADS * DIM) + d[:, None], mask=ok[None, :], other=0.0)
        scores = tl.dot(q, k, input_precision=PRECISION) * scale
        scores = tl.where(ok[None, :], scores, float("-inf"))
        new_best = tl.maximum(best, tl.max(scores, axis=1))
        shrink = tl.exp(best - new_best)
        p = tl.exp(scores - new_best[:, None])
        v = tl.load(v_head + row[:, None] * (HEADS * DIM) + d[None, :], mask=ok[:, None], other=0.0)
        total = total * shrink + tl.sum(p, axis=1)
        acc = acc * shrink[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        best = new_best
    row_0 = tl.sum(tl.where(first[:, None], acc, 0.0), axis=0)
    return row_0, tl.max(tl.where(first, best, -1e30), axis=0), tl.sum(tl.where(first, total, 0.0))


@triton.jit
def _attention_merge(
    part_ptr,
    out_ptr,
    HEADS: tl.constexpr,
    DIM: tl.constexpr,
    SLICES: tl.constexpr,
    SLICES_POW2: tl.constexpr,
):
    b, h = tl.program_id(0), tl.program_id(1)
    s = tl.arange(0, SLICES_POW2)
    d = tl.arange(0, DIM)
    inside = s < SLICES
    base = ((b * HEADS + h) * SLICES + s) * (DIM + 2)
    best = tl.load(part_ptr + base + DIM, mask=inside, other=-1e30)
    total = tl.load(part_ptr + base + DIM + 1, mask=inside, other=0.0)
    acc = tl.load(part_ptr + base[:, None] + d[None, :], mask=inside[:, None], other=0.0)
    weight = tl.exp(best - tl.max(best, axis=0))
    out = tl.sum(acc * weight[:, None], axis=0) / tl.sum(total * weight, axis=0)
    tl.store(out_ptr + (b * HEADS + h) * DIM + d, out.to(out_ptr.dtype.element_ty))


def dot_precision(dtype: torch.dtype) -> str:
    """tl.dot's input precision for our kernels: exact fp32 products for an fp32 model (the
    CPU, the fp32 tests), tf32 otherwise (ignored for bf16 inputs)."""
    return "ieee" if dtype == torch.float32 else "tf32"


def attention_slices(batch: int, heads: int, width: int, programs: int) -> tuple[int, int]:
    """(rows per slice, slices) for ``batch`` sequences of ``width`` rows: enough slices for
    about ``programs`` programs, each a whole number of ROW_GRAIN rows."""
    grains = triton.cdiv(width, ROW_GRAIN)
    slices = max(1, min(grains, triton.cdiv(programs, batch * heads)))
    chunk = triton.cdiv(grains, slices) * ROW_GRAIN
    return chunk, triton.cdiv(width, chunk)


def paged_decode_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    rows: torch.Tensor,
    valid: torch.Tensor,
    tile: Tile | None = None,
    programs: int | None = None,
) -> torch.Tensor:
    """q: (B, H, D); k_pool/v_pool: (pool rows, H, D) of one layer; rows: (B, R) pool rows each
    sequence reads; valid: (B, R) which of them count. Returns softmax(q·k/√D)·v: (B, H, D).
    Every sequence needs at least one valid row (the graphs' padding rows keep column 0)."""
    batch, heads, dim = q.shape
    width = rows.shape[1]
    plan = attention_plan(batch, card_name(q.device))
    chunk, slices = attention_slices(batch, heads, width, programs or plan.programs)
    tile = tile or plan.tile
    parts = torch.empty(batch, heads, slices, dim + 2, device=q.device, dtype=torch.float32)
    out = torch.empty_like(q)
    _attention_slices[(batch, heads, slices)](
        q.contiguous(),
        k_pool,
        v_pool,
        rows.contiguous(),
        valid.contiguous().view(torch.uint8),
        parts,
        width,
        dim**-0.5,
        CHUNK=chunk,
        HEADS=heads,
        DIM=dim,
        SLICES=slices,
        PRECISION=dot_precision(q.dtype),
        BLOCK=tile.block,
        MMA=tile.mma,
        num_warps=tile.warps,
        num_stages=tile.stages,
    )
    _attention_merge[(batch, heads)](
        parts, out, HEADS=heads, DIM=dim, SLICES=slices, SLICES_POW2=triton.next_power_of_2(slices)
    )
    return out
