"""A decoder layer's MoE through kernels/moe.py: routing, the chosen experts, the shared
experts and their sum (and, on request, the dense first layer as one SiLU-gated MLP). Built
from the native modules' weights (no copy of the experts); the module itself stays the
reference and the fallback for any shape or setting the kernels do not cover."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ocr_worker.engines.unlimited_ocr.kernels import moe as moe_kernels
from ocr_worker.engines.unlimited_ocr.kernels import norms, routing
from ocr_worker.engines.unlimited_ocr.step.grouped_experts import dense_mlp, grouped_experts

# Where a MoE layer's shared experts run (the benches compare them):
# "all": in the routed experts' gate/up launch and their down launch, and the experts' sum,
#   the residual add and the next RMSNorm in one kernel: 4 launches a layer (routing in one);
# "down": the routed and shared gate/up in a launch each, both downs in one (5);
# "none": 7 launches, as first built.
# None (the default) picks by the token count, as measured on the H200 (bench/engine/mlp_bench.py, a
# layer replayed from a graph): "all" at 1 and 16 tokens (37.7 and 111.7 µs against "down"'s
# 41.4 and 114.5), "down" at 128 (179.0 against 210.5: there the one gate/up launch of both
# MLPs is the longer).
MOE_MERGE: str | None = None
MOE_MERGES = ("all", "down", "none")
MERGE_ALL_UP_TO = 32  # tokens; between 16 and 128 not yet measured


def merge_for(tokens: int) -> str:
    return MOE_MERGE or ("all" if tokens <= MERGE_ALL_UP_TO else "down")


def fused_mlp(mlp: Any, *, dense: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """The kernels' version of ``mlp`` (UnlimitedOcrTextMoe, or with ``dense`` the first
    layer's UnlimitedOcrTextMLP), or the module itself where they do not apply. The dense
    MLP stays with cuBLAS by default: one 6848-wide MLP is what cuBLAS does best (28 µs
    against our 40-84 on the H200, bench/engine/mlp_bench.py)."""
    try:
        if hasattr(mlp, "experts"):
            return _MoeMlp(mlp)
        return _DenseMlp(mlp) if dense else mlp  # type: ignore[no-any-return]
    except _Unsupported:
        return mlp  # type: ignore[no-any-return]


class _Unsupported(Exception):
    pass


class _DenseMlp:
    def __init__(self, mlp: Any) -> None:
        self.gate_up, self.down = _stacked(mlp)
        self.tiles: moe_kernels.Tiles | None = None  # None: by the token count

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return moe_kernels.expert_mlp(h, self.gate_up, self.down, tiles=self.tiles)


class _MoeMlp:
    def __init__(self, moe: Any) -> None:
        router, experts = moe.gate, moe.experts
        if router.topk_method != "greedy" or getattr(experts, "is_transposed", False):
            raise _Unsupported
        if getattr(experts, "has_bias", False) or _act_name(experts.act_fn) != "silu":
            raise _Unsupported
        hidden, inter = experts.down_proj.shape[1], experts.down_proj.shape[2]
        if not moe_kernels.tiles_fit(hidden, inter):
            raise _Unsupported
        self.router, self.top_k = router.weight, router.top_k
        self.scale = float(router.routed_scaling_factor)
        self.gate_up, self.down = experts.gate_up_proj, experts.down_proj
        self.shared_gate_up, self.shared_down = _stacked(moe.shared_experts)
        self.tiles: moe_kernels.Tiles | None = None  # None: by the token count
        self.merge: str | None = None  # None: merge_for(the token count)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return moe_kernels.combine(*self._experts(h, self._layout(h)), self.top_k)

    def add_and_norm(
        self, x: torch.Tensor, h: torch.Tensor, norm: Any, grouped_mm: bool = False
    ) -> tuple[Any, Any]:
        """(x + self(h), norm(x + self(h))): the sum of the experts, the residual add and the
        next RMSNorm in one kernel. ``grouped_mm``: the experts' GEMMs by torch's grouped GEMM
        and cuBLAS instead of our kernels (grouped_experts.py: a prefill's thousands of tokens)."""
        if grouped_mm:
            return self._grouped_add_and_norm(x, h, norm)
        merge = self._layout(h)
        if merge == "none":
            return norms.add_rms_norm(x, self(h), norm.weight, norm.variance_epsilon)
        routed, shared = self._experts(h, merge)
        return moe_kernels.combine_add_rms_norm(
            routed, shared, self.top_k, x, norm.weight, norm.variance_epsilon
        )

    def _layout(self, h: torch.Tensor) -> str:
        merge = self.merge or merge_for(h.shape[0])
        assert merge in MOE_MERGES, merge
        return merge

    def _grouped_add_and_norm(
        self, x: torch.Tensor, h: torch.Tensor, norm: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ids, weights = routing.route(h, self.router, self.top_k, self.scale)
        rows, slots = grouped_experts(h, self.gate_up, self.down, ids)
        shared = dense_mlp(h, self.shared_gate_up[0], self.shared_down[0])
        return moe_kernels.combine_add_rms_norm(
            rows, shared, self.top_k, x, norm.weight, norm.variance_epsilon, (slots, weights)
        )

    def _experts(self, h: torch.Tensor, merge: str) -> tuple[torch.Tensor, torch.Tensor]:
        ids, weights = routing.route(h, self.router, self.top_k, self.scale)
        routed = (self.gate_up, self.down, ids, weights)
        shared = (self.shared_gate_up, self.shared_down)
        if merge != "none":
            split = merge == "down"
            return moe_kernels.moe_experts(h, routed, shared, self.tiles, split_gate_up=split)
        return (
            moe_kernels.expert_mlp(h, *routed, tiles=self.tiles),
            moe_kernels.expert_mlp(h, *shared, tiles=self.tiles),
        )


def mlp_add_and_norm(
    mlp: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    h: torch.Tensor,
    norm: Any,
    grouped_mm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A decoder layer's MLP on h, added to the residual stream x, then ``norm`` (the next
    RMSNorm): (x + mlp(h), norm(x + mlp(h))). ``grouped_mm``: a MoE's experts by torch's
    grouped GEMM (_MoeMlp.add_and_norm)."""
    if isinstance(mlp, _MoeMlp):
        return mlp.add_and_norm(x, h, norm, grouped_mm)
    return norms.add_rms_norm(x, mlp(h), norm.weight, norm.variance_epsilon)


def _stacked(mlp: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A gate/up/down MLP as one expert: gate_up (1, 2·I, hidden), down (1, hidden, I)."""
    if mlp.gate_proj.bias is not None or _act_name(mlp.act_fn) != "silu":
        raise _Unsupported
    down = mlp.down_proj.weight  # (hidden, I)
    if not moe_kernels.tiles_fit(*down.shape):
        raise _Unsupported
    gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])  # gate rows first
    return gate_up[None], down[None]


def _act_name(act: Any) -> str:
    return type(act).__name__.lower().replace("activation", "")
