"""A prefill's routed experts through torch's grouped GEMM (cutlass's sm_90 kernels on the
card), with none of transformers' work around it.

In a prefill (2,185 tokens an 8-page group) the experts' GEMMs are large enough for cutlass,
but transformers' module spends more around them than in them: on the H200 one group's 22
grouped GEMMs took 2.3 ms and its sort, gathers, fp32 router GEMM, top-k, weighting in a
(pairs, hidden) fp32 tensor, unpermute and fp32 sum ~3.8 ms more (bench/RESULTS.md). Here the
routing is one kernel (kernels/routing.py), the pairs are grouped by expert with
moe_kernels.pair_plan (one launch, no host sync), SiLU(gate)·up is one kernel, and one more
weighs the pairs into the layout that moe_kernels' combine kernel sums, adds to the residual
stream and normalises in one pass.

Rounding is transformers' grouped_mm path: each projection rounded to the model's dtype,
SiLU(gate)·up in that dtype, the routing weight applied in fp32."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.kernels import moe as moe_kernels
from ocr_worker.engines.unlimited_ocr.kernels.moe_programs import silu_times_up

# Newer torch releases name it in torch.nn.functional; earlier ones only as torch._grouped_mm.
_grouped_mm: Callable[..., torch.Tensor] = getattr(F, "grouped_mm", None) or torch._grouped_mm


def grouped_experts(
    h: torch.Tensor,  # (N, hidden)
    gate_up: torch.Tensor,  # (E, 2·I, hidden), the gate rows first
    down: torch.Tensor,  # (E, hidden, I)
    ids: torch.Tensor,  # (N, top_k) chosen experts
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token through its chosen experts: the (N·top_k, hidden) rows in the grouped order,
    unweighted, in h's dtype, and each pair's row among them (its slot), the form
    moe_kernels.combine_add_rms_norm weighs and sums as it reads (``gathered``)."""
    experts, top_k = down.shape[0], ids.shape[1]
    plan, slots = moe_kernels.pair_plan_and_slots(ids, experts)
    # Where each expert's pairs end: grouped_mm's offsets, copied to a tensor of their own (a
    # view one int32 into the plan would be misaligned for the kernel's vector loads).
    ends = plan[1 : experts + 1].clone()
    order = plan[experts + 1 :]  # the pairs, grouped by expert
    # index_select's gather, not h[...]'s indexing kernel: a third of its time on the H200
    tokens = h.index_select(0, order // top_k)
    projected = _grouped_mm(tokens, gate_up.transpose(1, 2), offs=ends)
    return _grouped_mm(silu_mul(projected), down.transpose(1, 2), offs=ends), slots


def silu_mul(projected: torch.Tensor) -> torch.Tensor:
    """(P, 2·I) gate then up → SiLU(gate)·up (P, I), each rounded to the dtype as torch's two
    ops round them, in one pass over the rows instead of two over strided halves."""
    rows, width = projected.shape
    act = torch.empty(rows, width // 2, device=projected.device, dtype=projected.dtype)
    if rows:
        _silu_mul[(rows,)](
            projected, act, INTER=width // 2, BLOCK=triton.next_power_of_2(width // 2)
        )
    return act


@triton.jit
def _silu_mul(projected_ptr, act_ptr, INTER: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    inside = columns < INTER
    dtype = act_ptr.dtype.element_ty
    gate = tl.load(projected_ptr + row * 2 * INTER + columns, mask=inside).to(tl.float32)
    up = tl.load(projected_ptr + row * 2 * INTER + INTER + columns, mask=inside).to(tl.float32)
    tl.store(act_ptr + row * INTER + columns, silu_times_up(gate, up, dtype), mask=inside)


def dense_mlp(h: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """One SiLU-gated MLP (the shared experts) by cuBLAS: gate_up (2·I, hidden), down
    (hidden, I). Gate and up in one GEMM; each column is the same dot product as the
    module's two, rounded once; SiLU·up in one kernel, as the routed experts'."""
    return F.linear(silu_mul(F.linear(h, gate_up)), down)
