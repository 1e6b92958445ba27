"""SAM's global attention without its relative-position bias in memory.

SAM's attention adds a decomposed relative-position term to every score:
``score(q, k) = scale·q·k + Rh[q, row(k)] + Rw[q, column(k)]``. transformers builds that term
as a full (heads, 4096, 4096) bias per page and layer (400 MB for a 1024 view); on the H200
writing it was 7.3 of the tower's 11 ms per page (bench/engine/step_profile.py). The same scores
come from one dot product over longer vectors, with no bias at all:

    q' = [scale·q, Rh[q, ·], Rw[q, ·]]        k' = [k, onehot(row(k)), onehot(column(k))]

so ``q'·k' = scale·q·k + Rh[q, row(k)] + Rw[q, column(k)]``, and fused attention (SDPA with no
mask, scale 1) computes softmax(q'·k')·v directly. Only the global layers (the whole grid in
one window) are changed; the windowed layers' bias is small.
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F


def use_fused_rel_pos(vision_model: Any) -> int:
    """Give every global SAM attention of ``vision_model`` this forward; returns how many."""
    changed = 0
    for module in vision_model.modules():
        window = getattr(module, "window_size", None)
        attn = getattr(module, "attn", None)
        if window == 0 and attn is not None and getattr(attn, "use_rel_pos", False):
            attn.forward = types.MethodType(global_attention, attn)
            changed += 1
    return changed


def global_attention(
    self: Any, hidden_states: torch.Tensor, output_attentions: bool = False
) -> tuple[torch.Tensor, None]:
    """The module's own computation (its qkv, rel_pos_h/w, proj), the bias folded into q·k."""
    batch, height, width, _ = hidden_states.shape
    heads, tokens = self.num_attention_heads, height * width
    qkv = self.qkv(hidden_states).reshape(batch, tokens, 3, heads, -1).permute(2, 0, 3, 1, 4)
    query, key, value = qkv.unbind(0)  # (B, heads, tokens, D)
    dim = query.shape[-1]
    rows = self.get_rel_pos(height, height, self.rel_pos_h)  # (H, H, D): query row, key row
    columns = self.get_rel_pos(width, width, self.rel_pos_w)  # (W, W, D)
    grid = query.reshape(batch, heads, height, width, dim)
    by_row = torch.einsum("bnhwc,hkc->bnhwk", grid, rows).reshape(batch, heads, tokens, height)
    by_col = torch.einsum("bnhwc,wkc->bnhwk", grid, columns).reshape(batch, heads, tokens, width)
    row_of, col_of = _key_onehots(height, width, query)
    query = torch.cat([query * self.scale, by_row, by_col], dim=-1)
    key = torch.cat(
        [key, row_of.expand(batch, heads, -1, -1), col_of.expand(batch, heads, -1, -1)], dim=-1
    )
    value = F.pad(value, (0, height + width))  # fused kernels want one head size throughout
    out = F.scaled_dot_product_attention(query, key, value, scale=1.0)[..., :dim]
    out = out.reshape(batch, heads, height, width, dim).permute(0, 2, 3, 1, 4)
    return self.proj(out.reshape(batch, height, width, -1)), None


def _key_onehots(height: int, width: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, 1, H·W, H) and (1, 1, H·W, W): the row and the column of each key, one-hot."""
    eye_h = torch.eye(height, device=like.device, dtype=like.dtype)
    eye_w = torch.eye(width, device=like.device, dtype=like.dtype)
    row_of = eye_h.repeat_interleave(width, dim=0)  # key (r, c) is row r
    col_of = eye_w.repeat(height, 1)  # ... and column c
    return row_of[None, None], col_of[None, None]
