"""A prefill's routed experts through torch's grouped GEMM (cutlass's sm_90 kernels on the
card), with none of transformers' work around it.

In a prefill (2,185 tokens an 8-page group) the experts' GEMMs are large enough for cutlass,
but transformers' module spends more around them than in them: on the H200 one group's 22
grouped GEMMs took 2.3 ms and its sort, gathers, fp32 router GEMM, top-k, weighting in a
(pairs, hidden) fp32 tensor, unpermute and fp32 sum ~3.8 ms more (bench/RESULTS.md). Here the
routing is one kernel (routing_kernels.py), the pairs are grouped by expert with
moe_kernels.pair_plan (no host sync), and the weighted pairs land in the layout that
moe_kernels' combine kernel sums, adds to the residual stream and normalises in one pass.

Rounding is transformers' grouped_mm path: each projection rounded to the model's dtype,
SiLU(gate)·up in that dtype, the routing weight applied in fp32."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ocr_worker.engines.unlimited_ocr import moe_kernels

# Newer torch releases name it in torch.nn.functional; earlier ones only as torch._grouped_mm.
_grouped_mm: Callable[..., torch.Tensor] = getattr(F, "grouped_mm", None) or torch._grouped_mm


def grouped_experts(
    h: torch.Tensor,  # (N, hidden)
    gate_up: torch.Tensor,  # (E, 2·I, hidden), the gate rows first
    down: torch.Tensor,  # (E, hidden, I)
    ids: torch.Tensor,  # (N, top_k) chosen experts
    weights: torch.Tensor,  # (N, top_k) fp32 routing weights
) -> torch.Tensor:
    """Each token through its chosen experts: (N·top_k, hidden) fp32 weighted pairs, in the
    top-k table's order, as moe_kernels.expert_mlp returns them for combine."""
    experts, top_k = down.shape[0], ids.shape[1]
    plan = moe_kernels.pair_plan(ids, experts)
    # Where each expert's pairs end: grouped_mm's offsets, copied to a tensor of their own (a
    # view one int32 into the plan would be misaligned for the kernel's vector loads).
    ends = plan[1 : experts + 1].clone()
    order = plan[experts + 1 :].long()  # the pairs, grouped by expert
    projected = _grouped_mm(h[order // top_k], gate_up.transpose(1, 2), offs=ends)
    gate, up = projected.chunk(2, dim=-1)
    out = _grouped_mm(F.silu(gate) * up, down.transpose(1, 2), offs=ends)  # (pairs, hidden)
    pairs = torch.empty(out.shape, dtype=torch.float32, device=out.device)
    pairs[order] = out * weights.flatten()[order, None]  # bf16 times fp32: fp32, as transformers
    return pairs


def dense_mlp(h: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """One SiLU-gated MLP (the shared experts) by cuBLAS: gate_up (2·I, hidden), down
    (hidden, I). Gate and up in one GEMM; each column is the same dot product as the
    module's two, rounded once."""
    gate, up = F.linear(h, gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, down)
