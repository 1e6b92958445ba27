"""The decode step's small fused kernels (Triton; GPU, or Triton's interpreter in tests).

Run as torch ops, one sequence's step was ~950 tiny kernels (RMSNorm alone is seven per call,
RoPE a dozen per layer; bench/engine/step_profile.py):

- ``rope_store`` rotates q and k from the fused QKV projection and writes k and v into their
  ring slots: one kernel where there were fourteen.
- ``add_rms_norm`` adds the residual and normalises, one kernel where there were eight, with
  the rounding of transformers' RMSNorm (fp32 statistics, normalised value in the model's dtype,
  then times the weight). ``residual_rms_norm`` is its body, which the experts' combine kernel
  (moe.py) runs too.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


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
    layer at a prefill pass's 15,295 rows, against 139 at one head a program (H100,
    bench/engine/pass_kernels_bench.py; bench/RESULTS.md, "GPU engine: kernels")."""
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
