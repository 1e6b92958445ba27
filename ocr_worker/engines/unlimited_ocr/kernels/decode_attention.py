"""Fused kernels for the decode step (Triton; GPU, or Triton's interpreter in tests).

The profile of the step as plain torch ops (bench/step_profile.py, results in bench/RESULTS.md)
showed where the time goes: at 128 sequences, copying every sequence's ~2,300 KV rows out of
the block pool so that SDPA can read them (10 ms of 19), then SDPA with a mask (4 ms); at one
sequence, ~950 tiny kernels (RMSNorm alone is seven per call, RoPE a dozen per layer).

- ``paged_decode_attention`` reads K/V straight from the pool through the row table, one
  program per (sequence, head, slice of rows), with an online softmax ("flash decoding"); a
  second kernel merges the slices. No gathered copy is ever written.
- ``rope_store`` rotates q and k from the fused QKV projection and writes k and v into their
  ring slots: one kernel where there were fourteen.
- ``add_rms_norm`` adds the residual and normalises, one kernel where there were eight, with
  the rounding of transformers' RMSNorm (fp32 statistics, normalised value in the model's dtype,
  then times the weight).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

ROW_GRAIN = 16  # a slice's rows are a multiple of this
QUERY_ROWS = tl.constexpr(16)  # the least M a tensor-core product takes: the query, padded


class Tile(NamedTuple):
    """How a program runs its slice: ``block`` rows a tile; ``mma``: the tile's two products
    on the tensor cores, the query padded to QUERY_ROWS rows. The padding is wasted work, but
    it is the form Triton's pipeliner knows: the next tiles' K and V are copied into shared
    memory ahead (``stages``) while this tile is reduced, so a program keeps tiles in flight;
    the plain form (products on the CUDA cores) waits on each tile's loads."""

    block: int
    warps: int
    stages: int = 3
    mma: bool = False


# The tiles bench/attention_bench.py times (and the sm_90 build test compiles). The engine's
# tile and program counts come from its runs on each card (bench/RESULTS.md), not from Triton's
# autotuner at run time: the engine first runs a shape in a CUDA graph's warm-up, whose padding
# rows read one masked row; a choice timed on that workload left the step no faster on real rows.
TILES = [
    Tile(16, 2),
    Tile(32, 4),
    Tile(64, 4),
    Tile(64, 8),
    Tile(128, 8),
    Tile(16, 1, mma=True),
    Tile(16, 2, mma=True),
    Tile(16, 2, 4, mma=True),
    Tile(32, 1, mma=True),
    Tile(32, 2, mma=True),
    Tile(32, 4, mma=True),
    Tile(64, 8, mma=True),
]


class AttentionPlan(NamedTuple):
    """How a step of up to ``up_to`` sequences launches: its tile, and the programs it aims
    for (attention_slices): enough slices a head to fill the card, few enough that the last
    wave is not left mostly idle."""

    up_to: int
    tile: Tile
    programs: int


ANY = 1 << 30  # a plan for every larger step
# Per card (torch.cuda.get_device_name), the fastest of attention_bench's grid over ~2,300 rows,
# as a step's 12 layers take it. A card not listed takes the H200's, the issue's card.
# - H200 (run B): 16-row tiles, 121 / 726 / 4,706 µs at 1 / 16 / 128 sequences.
# - H100 (runs K, L): 32-row tiles from 2 sequences on, 842 µs at 16 and 6,045 at 128 against
#   16-row tiles' 886 and 6,177; at one sequence, whose slices are 16 rows, 16-row tiles (129 µs
#   against 138).
PLANS = {
    "NVIDIA H200": (
        AttentionPlan(16, Tile(16, 1, mma=True), 2048),
        AttentionPlan(ANY, Tile(16, 1, mma=True), 4096),
    ),
    "NVIDIA H100 80GB HBM3": (
        AttentionPlan(1, Tile(16, 1, mma=True), 2048),
        AttentionPlan(16, Tile(32, 1, mma=True), 2048),
        AttentionPlan(ANY, Tile(32, 1, mma=True), 4096),
    ),
}
DEFAULT_CARD = "NVIDIA H200"


def card_name(device: torch.device) -> str:
    """The card's name as torch gives it ("cpu" off the GPU), looked up once a card."""
    if device.type != "cuda":
        return "cpu"
    return _card_name(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _card_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


def plans_for(card: str) -> tuple[AttentionPlan, ...]:
    """The plans measured on ``card`` (card_name), or the H200's for a card not listed."""
    return PLANS.get(card, PLANS[DEFAULT_CARD])


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


@triton.jit
def _rotate_half(source, out, cos, sin, heads, real, DIM: tl.constexpr):
    """Rotate-half RoPE of the heads ``heads`` (``real`` the ones that exist), each product
    rounded as the torch ops round it; ``source`` and ``out`` point at head 0 of one row."""
    columns = heads[:, None] * DIM + tl.arange(0, DIM // 2)[None, :]
    mask = real[:, None]
    dtype = out.dtype.element_ty
    first = tl.load(source + columns, mask=mask).to(tl.float32)
    second = tl.load(source + DIM // 2 + columns, mask=mask).to(tl.float32)
    low = (first * cos).to(dtype).to(tl.float32) - (second * sin).to(dtype).to(tl.float32)
    high = (second * cos).to(dtype).to(tl.float32) + (first * sin).to(dtype).to(tl.float32)
    tl.store(out + columns, low.to(dtype), mask=mask)
    tl.store(out + DIM // 2 + columns, high.to(dtype), mask=mask)


@triton.jit
def _rope_store(
    qkv_ptr,
    cos_ptr,
    sin_ptr,
    q_out_ptr,
    k_pool_ptr,
    v_pool_ptr,
    write_rows_ptr,
    HEADS: tl.constexpr,
    HEADS_BLOCK: tl.constexpr,
    DIM: tl.constexpr,
):
    """One row's HEADS_BLOCK heads a program (a power of two; the last block masked)."""
    n = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * HEADS_BLOCK + tl.arange(0, HEADS_BLOCK)
    real = heads < HEADS
    half = tl.arange(0, DIM // 2)[None, :]
    cos = tl.load(cos_ptr + n * DIM + half).to(tl.float32)  # the table repeats its halves
    sin = tl.load(sin_ptr + n * DIM + half).to(tl.float32)
    source = qkv_ptr + n * 3 * HEADS * DIM
    target = tl.load(write_rows_ptr + n).to(tl.int64) * (HEADS * DIM)
    _rotate_half(source, q_out_ptr + n * HEADS * DIM, cos, sin, heads, real, DIM)
    _rotate_half(source + HEADS * DIM, k_pool_ptr + target, cos, sin, heads, real, DIM)
    columns = heads[:, None] * DIM + tl.arange(0, DIM)[None, :]
    values = tl.load(source + 2 * HEADS * DIM + columns, mask=real[:, None])
    tl.store(v_pool_ptr + target + columns, values, mask=real[:, None])


def rope_store(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    write_rows: torch.Tensor,
    heads_block: int | None = None,
) -> torch.Tensor:
    """qkv: (N, 3·H·D) from the fused projection; cos/sin: (N, D) in the model's dtype.
    Writes rotated k and v into pool rows ``write_rows`` (N,); returns rotated q: (N, H, D).
    ``heads_block``: heads a program, a power of two; by default all of a row's: 84 µs a
    layer at a prefill pass's 15,295 rows, against 139 at one head a program (H100, run F,
    bench/pass_kernels_bench.py)."""
    count = qkv.shape[0]
    _, heads, dim = k_pool.shape
    block = heads_block or triton.next_power_of_2(heads)
    q = torch.empty(count, heads, dim, device=qkv.device, dtype=k_pool.dtype)
    _rope_store[(count, triton.cdiv(heads, block))](
        qkv.contiguous(),
        cos.contiguous(),
        sin.contiguous(),
        q,
        k_pool,
        v_pool,
        write_rows.contiguous(),
        HEADS=heads,
        HEADS_BLOCK=block,
        DIM=dim,
    )
    return q


@triton.jit
def _add_rms_norm(
    x_ptr,
    delta_ptr,
    weight_ptr,
    sum_ptr,
    out_ptr,
    eps,
    COLUMNS: tl.constexpr,
    BLOCK: tl.constexpr,
    ADD: tl.constexpr,
):
    n = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    inside = columns < COLUMNS
    x = tl.load(x_ptr + n * COLUMNS + columns, mask=inside, other=0.0).to(tl.float32)
    delta = x
    if ADD:
        delta = tl.load(delta_ptr + n * COLUMNS + columns, mask=inside, other=0.0).to(tl.float32)
    residual_rms_norm(x, delta, weight_ptr, sum_ptr, out_ptr, n, columns, inside, eps, COLUMNS, ADD)


@triton.jit
def residual_rms_norm(
    x,
    delta,
    weight_ptr,
    sum_ptr,
    out_ptr,
    row,
    columns,
    inside,
    eps,
    COLUMNS: tl.constexpr,
    ADD: tl.constexpr,
):
    """One row: x + delta (ADD; x and delta hold values of the model's dtype, in fp32) stored
    at sum_ptr, then its RMSNorm times the weight at out_ptr, rounded as transformers rounds."""
    dtype = out_ptr.dtype.element_ty
    offsets = row * COLUMNS + columns
    if ADD:  # the residual stream is kept in the model's dtype, as the torch ops keep it
        x = (x + delta).to(dtype).to(tl.float32)
        tl.store(sum_ptr + offsets, x.to(dtype), mask=inside)
    variance = tl.sum(x * x, axis=0) / COLUMNS
    normed = (x * tl.rsqrt(variance + eps)).to(dtype).to(tl.float32)
    weight = tl.load(weight_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, (normed * weight).to(dtype), mask=inside)


def add_rms_norm(
    x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, delta: (N, C). Returns (x + delta, RMSNorm(x + delta)); without delta, (x, RMSNorm(x))."""
    x = x.contiguous()
    count, columns = x.shape
    summed = torch.empty_like(x) if delta is not None else x
    out = torch.empty_like(x)
    _add_rms_norm[(count,)](
        x,
        x if delta is None else delta.contiguous(),
        weight,
        summed,
        out,
        eps,
        COLUMNS=columns,
        BLOCK=triton.next_power_of_2(columns),
        ADD=delta is not None,
    )
    return summed, out
