"""The decode step through our Triton kernels: the same arithmetic as ModelRunner.step's torch
ops (the reference, used on the CPU and for SR-SWA's scored batches), in a quarter as many
kernels, with attention reading the block pool in place (kernels/decode_attention.py says why)
and the MLPs routed on the GPU (kernels/moe.py)."""

from __future__ import annotations

from typing import Any

import structlog
import torch
import torch.nn.functional as F

from ocr_worker.engines.unlimited_ocr.kernels import norms
from ocr_worker.engines.unlimited_ocr.kernels.decode_attention import paged_decode_attention
from ocr_worker.engines.unlimited_ocr.kernels.prefill_attention import paged_prefill_attention
from ocr_worker.engines.unlimited_ocr.step.batch_rows import BatchRows
from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp, mlp_add_and_norm
from ocr_worker.engines.unlimited_ocr.step.prefill_part import PrefillPass
from ocr_worker.engines.unlimited_ocr.step.step_inputs import step_inputs

log = structlog.get_logger(__name__)

# How a prefill runs its MoE layers: "module", transformers' own (its sort, gathers, grouped
# GEMMs and fp32 weighting); "grouped_mm", the same cutlass grouped GEMMs with our routing and
# sum around them (grouped_experts.py); "kernels", our expert kernels over a sorted pair table.
# On the H200 a group's prefill took 7.3 ms of GPU work by grouped_mm, 10.0 by the module and
# 10.9 by our kernels, and 128 documents ran 4% faster than by the module (bench/RESULTS.md,
# "GPU engine: kernels").
PREFILL_MOE = "grouped_mm"
PREFILL_MOES = ("module", "grouped_mm", "kernels")

# How a prefill pass attends on the GPU: "flash", torch's varlen flash attention over K and V
# gathered out of the pool (PrefillPass.attend); "triton", prefill_attention.py reading the
# pool in place: a pass's GPU work on an H100 4,364 µs a group against 4,539 (bench/RESULTS.md,
# "GPU engine: kernels"). Off the GPU, SDPA part by part either way.
PREFILL_ATTENTION = "triton"
PREFILL_ATTENTIONS = ("flash", "triton")


class FusedStep:
    def __init__(
        self,
        embed: Any,
        layers: Any,
        norm: Any,
        lm_head: Any,
        rotary: tuple[torch.Tensor, torch.Tensor],  # step_inputs.rotary_table
    ) -> None:
        self.embed, self.layers, self.norm, self.lm_head = embed, layers, norm, lm_head
        self.rotary = rotary
        # q, k and v in one projection: one GEMM per layer instead of three.
        self.qkv_weight = [_fused(layer, "weight") for layer in layers]
        self.qkv_bias = [_fused(layer, "bias") if _has_bias(layer) else None for layer in layers]
        # The MoE layers (routing, experts, shared experts, the next norm) in four or five
        # launches instead of ~25 (fused_mlp.merge_for).
        self.mlps = [fused_mlp(layer.mlp) for layer in layers]
        self.prefill_moe = PREFILL_MOE
        self.prefill_attention = PREFILL_ATTENTION
        self.whole_last_layer = False  # every row through the last layer (tiles_bench's base)

    @torch.no_grad()
    def __call__(
        self,
        tokens: torch.Tensor,  # (B,) the ids fed
        positions: torch.Tensor,  # (B,)
        generated: torch.Tensor,  # (B,) tokens generated, the one fed included
        batch: BatchRows,  # the rows each sequence reads
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,  # (L, pool rows, H, D)
    ) -> torch.Tensor:
        x = self.embed(tokens).to(v_pool.dtype)
        write_rows, valid, cos, sin = step_inputs(positions, generated, batch, self.rotary)
        rows = batch.rows
        first = self.layers[0].input_layernorm
        x, h = norms.add_rms_norm(x, None, first.weight, first.variance_epsilon)
        for index, layer in enumerate(self.layers):
            qkv = F.linear(h, self.qkv_weight[index], self.qkv_bias[index])
            q = norms.rope_store(qkv, cos, sin, k_pool[index], v_pool[index], write_rows)
            attn = paged_decode_attention(q, k_pool[index], v_pool[index], rows, valid)
            post = layer.post_attention_layernorm
            x, h = norms.add_rms_norm(
                x, layer.self_attn.o_proj(attn.flatten(1)), post.weight, post.variance_epsilon
            )
            x, h = mlp_add_and_norm(self.mlps[index], x, h, self._norm_after(index))
        # h is the final norm's output. The logits stay in the model's dtype: the token choice
        # reads them as they are (an fp32 copy is a write and a read of B x 129k floats).
        return self.lm_head(h)  # type: ignore[no-any-return]

    @torch.no_grad()
    def prefill(
        self,
        x: torch.Tensor,  # (T, hidden): the new segments' embeddings, every part's in turn
        cos: torch.Tensor,
        sin: torch.Tensor,  # (T, D)
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,
        new_rows: torch.Tensor,  # (T,) where the new rows' k and v go
        packed: PrefillPass,  # each sequence's tokens, and the rows they attend to
    ) -> torch.Tensor:
        """Prefills with the step's norm, QKV and RoPE kernels: a group's prefill is ~1,500
        launches in torch ops and waits on the host (32 ms for an 8-page group, 12 of them
        GPU work). The MoE runs as ``prefill_moe`` says (PREFILL_MOE). The last layer runs
        whole only up to its k and v: past them only each part's last row goes on, whose logits
        are all a prefill returns; the other rows' attention and MoE there would go unread.
        Returns each part's last-row logits, (len(parts), V)."""
        first = self.layers[0].input_layernorm
        x, h = norms.add_rms_norm(x, None, first.weight, first.variance_epsilon)
        last_rows_only = len(self.layers) - 1 if not self.whole_last_layer else None
        for index, layer in enumerate(self.layers):
            qkv = F.linear(h, self.qkv_weight[index], self.qkv_bias[index])
            q = norms.rope_store(qkv, cos, sin, k_pool[index], v_pool[index], new_rows)
            if index != last_rows_only:
                out = self._attend(packed, q, k_pool[index], v_pool[index])  # (T, H, D)
            else:  # every row's k and v are stored: the rest is for the last rows' logits
                x, q = x.index_select(0, packed.last_rows), q.index_select(0, packed.last_rows)
                out = packed.attend_last(q, k_pool[index], v_pool[index])  # (parts, H, D)
            post = layer.post_attention_layernorm
            x, h = norms.add_rms_norm(
                x, layer.self_attn.o_proj(out.flatten(1)), post.weight, post.variance_epsilon
            )
            following = self._norm_after(index)
            if self.prefill_moe != "module":
                grouped = self.prefill_moe == "grouped_mm"
                x, h = mlp_add_and_norm(self.mlps[index], x, h, following, grouped)
            else:
                x, h = norms.add_rms_norm(
                    x, layer.mlp(h[None])[0], following.weight, following.variance_epsilon
                )
        if self.whole_last_layer:
            h = h.index_select(0, packed.last_rows)
        return self.lm_head(h).float()

    def _attend(
        self, packed: PrefillPass, q: torch.Tensor, k_layer: torch.Tensor, v_layer: torch.Tensor
    ) -> torch.Tensor:
        """Every part's new rows over its own rows, as ``prefill_attention`` says."""
        if self.prefill_attention == "triton" and q.is_cuda:
            most_queries = packed.longest[0]
            try:
                return paged_prefill_attention(
                    q, k_layer, v_layer, packed.rows, packed.bounds, most_queries
                )
            except torch.cuda.OutOfMemoryError:  # the kernel is not at fault
                raise
            except Exception as error:  # a build or card it does not compile for: flash's
                log.warning("prefill_attention.disabled", error=str(error)[:300])
                self.prefill_attention = "flash"
        return packed.attend(q, k_layer, v_layer)

    def _norm_after(self, index: int) -> Any:
        """The RMSNorm after layer ``index``'s MLP: the next layer's input norm, or the last."""
        return self.layers[index + 1].input_layernorm if index + 1 < len(self.layers) else self.norm


def _fused(layer: Any, name: str) -> torch.Tensor:
    attn = layer.self_attn
    return torch.cat([getattr(p, name) for p in (attn.q_proj, attn.k_proj, attn.v_proj)])


def _has_bias(layer: Any) -> bool:
    return layer.self_attn.q_proj.bias is not None
