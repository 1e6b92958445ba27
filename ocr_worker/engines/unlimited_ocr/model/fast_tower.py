"""The vision tower (SAM-base + CLIP-L) as the engine runs it: transformers' modules and
weights, with the steps that kept the card waiting done another way.

- SAM's attention, global and windowed, with its relative positions folded into q·k
  (sam_attention.py): one fused attention a layer, no bias tensor in memory.
- SAM's patch embedding (a 16 x 16 convolution of stride 16 over 3 channels) as one GEMM over
  the pages' patches: cuDNN ran it as an implicit-GEMM kernel that took ~0.25 ms a page on the
  H200, for 4.8 GFLOP (bench/RESULTS.md, step_profile's tower kernels).
- CLIP's q, k and v projections as one GEMM (their weights laid side by side; the modules'
  own parameters become views of it, so no weight is held twice), and its attention through
  SDPA on views of that GEMM's output.
- The pages' features laid out (each row of the 16 x 16 grid + the newline token, then the
  view separator) for the whole batch at once, not page by page in Python.

Each step computes the model's own sums in another order, nothing else: CPU tests compare the
features with transformers' (test_fast_tower.py), GPU tests the tokens (test_gpu_parity.py).
"""

from __future__ import annotations

import math
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ocr_worker.engines.unlimited_ocr.model.sam_attention import (
    use_fused_rel_pos,
    use_fused_windows,
)


def use_fast_tower(model: Any, windows: bool = True) -> dict[str, int]:
    """Give ``model``'s vision tower (an UnlimitedOcrForConditionalGeneration's, already on its
    device) the forwards above; returns how many modules of each kind changed. ``windows``
    False: the windowed SAM layers keep transformers' attention (a bench's step between)."""
    tower = model.model.vision_tower
    sam = tower.sam_encoder
    changed = {"sam_global": use_fused_rel_pos(tower)}
    changed["sam_windowed"] = use_fused_windows(tower) if windows else 0
    sam.patch_embed.forward = types.MethodType(patch_embedding, sam.patch_embed)
    changed["patch_embedding"] = 1
    layers = tower.vision_encoder.encoder.layers
    for layer in layers:
        _fuse_qkv(layer.self_attn)
        layer.self_attn.forward = types.MethodType(clip_attention, layer.self_attn)
    changed["clip_attention"] = len(layers)
    return changed


@torch.no_grad()
def encode_pages(model: Any, pixels: torch.Tensor) -> torch.Tensor:
    """Base-mode pages (pages, 3, size, size) -> (pages, rows x (columns + 1) + 1, hidden):
    what transformers' ``get_image_features`` hands out page by page (its pooler_output), for
    the batch in one tensor."""
    inner = model.model
    features = inner.multi_modal_projector(inner.vision_tower(pixels).last_hidden_state)
    pages, tokens, hidden = features.shape
    side = math.isqrt(tokens)
    out = features.new_empty(pages, side * (side + 1) + 1, hidden)
    rows = out[:, :-1].view(pages, side, side + 1, hidden)
    rows[:, :, :side] = features.view(pages, side, side, hidden)
    rows[:, :, side] = inner.image_newline
    out[:, -1] = inner.view_separator
    return out


def patch_embedding(self: Any, pixel_values: torch.Tensor) -> torch.Tensor:
    """SAM's patch embedding (its ``projection`` convolution, kernel = stride = patch) as a GEMM
    over the patches; (B, rows, columns, hidden), as the module returns it."""
    batch, channels, height, width = pixel_values.shape
    size_h, size_w = self.patch_size
    rows, columns = height // size_h, width // size_w  # a convolution drops the remainder
    pixels = pixel_values[:, :, : rows * size_h, : columns * size_w]
    patches = pixels.reshape(batch, channels, rows, size_h, columns, size_w)
    patches = patches.permute(0, 2, 4, 1, 3, 5).reshape(batch, rows, columns, -1)
    conv = self.projection
    return F.linear(patches, conv.weight.reshape(conv.out_channels, -1), conv.bias)


def _fuse_qkv(attn: Any) -> None:
    """q, k and v's weights and biases side by side in one tensor each; the projections'
    own parameters become views of it (one copy of every weight, loaded values kept)."""
    if hasattr(attn, "qkv_weight"):  # fused already
        return
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    weight = torch.cat([p.weight.detach() for p in projections])
    bias = torch.cat([p.bias.detach() for p in projections])
    width = attn.q_proj.out_features
    for i, projection in enumerate(projections):
        part = slice(i * width, (i + 1) * width)
        projection.weight = nn.Parameter(weight[part], requires_grad=False)
        projection.bias = nn.Parameter(bias[part], requires_grad=False)
    attn.register_buffer("qkv_weight", weight, persistent=False)
    attn.register_buffer("qkv_bias", bias, persistent=False)


def clip_attention(
    self: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kw: Any
) -> tuple[torch.Tensor, None]:
    """CLIP's self-attention (its q/k/v/out projections and scale): one GEMM for q, k and v,
    SDPA on views of its output."""
    batch, tokens, _ = hidden_states.shape
    qkv = F.linear(hidden_states, self.qkv_weight, self.qkv_bias)
    qkv = qkv.view(batch, tokens, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
    query, key, value = qkv.unbind(0)  # (B, heads, tokens, D)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=self.scale
    )
    return self.out_proj(out.transpose(1, 2).reshape(batch, tokens, -1)), None
