"""SAM's global attention without its relative-position bias in memory.

SAM's attention adds a decomposed relative-position term to every score:
``score(q, k) = scale·q·k + Rh[q, row(k)] + Rw[q, column(k)]``. transformers builds that term
as a full (heads, 4096, 4096) bias per page and layer (400 MB for a 1024 view); on the H200
writing it was 7.3 of the tower's 11 ms per page (bench/engine/step_profile.py). The same scores
come from one dot product over longer vectors, with no bias at all:

    q' = [scale·q, Rh[q, ·], Rw[q, ·]]        k' = [k, onehot(row(k)), onehot(column(k))]

so ``q'·k' = scale·q·k + Rh[q, row(k)] + Rw[q, column(k)]``, and fused attention (SDPA with no
mask, scale 1) computes softmax(q'·k')·v directly. The global layers (the whole grid in one
window) gain most: ``use_fused_rel_pos``. The windowed layers (14 x 14 windows, 64 + 14 + 14
channels, padded with zeros to 96 for the fused kernels) gain too: transformers builds their
bias as a (windows, heads, 196, 196) tensor by a broadcast add and hands it to SDPA as a mask,
which reads it back; ``use_fused_windows`` (fast_tower.py applies both).
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


def use_fused_windows(vision_model: Any) -> int:
    """Give every windowed SAM layer of ``vision_model`` ``windowed_layer`` and its attention
    the folded forward; returns how many."""
    changed = 0
    for module in vision_model.modules():
        window = getattr(module, "window_size", None)
        attn = getattr(module, "attn", None)
        if window and attn is not None and getattr(attn, "use_rel_pos", False):
            attn.forward = types.MethodType(global_attention, attn)
            module.forward = types.MethodType(windowed_layer, module)
            changed += 1
    return changed


def windowed_layer(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    """A windowed SAM layer as transformers' (norm, attention in windows of the zero-padded
    grid, residual, norm, MLP, residual) with two copies fewer: the normed grid is written
    straight into the windows (no padded grid first), and the attention's windows are added
    to the residual where they lie (no grid put back together first)."""
    batch, height, width, channels = hidden_states.shape
    size = self.window_size
    rows, columns = -(-height // size), -(-width // size)
    windows = hidden_states.new_zeros(batch, rows, columns, size, size, channels)
    for grid, cells in _blocks(windows, self.layer_norm1(hidden_states)):
        cells.copy_(grid)
    attended, _ = self.attn(windows.view(-1, size, size, channels))
    attended = attended.view(batch, rows, columns, size, size, channels)
    out = torch.empty_like(hidden_states)
    for (grid, cells), (residual, _) in zip(
        _blocks(attended, out), _blocks(attended, hidden_states), strict=True
    ):
        torch.add(residual, cells, out=grid)
    return out + self.mlp(self.layer_norm2(out))


def _blocks(windows: torch.Tensor, grid: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``grid`` (B, H, W, C) and ``windows`` (B, rows, columns, size, size, C) of its padded
    grid, as pairs of matching views (B, r, h, c, w, C): the whole windows, then the last
    row's and column's parts (a grid that is no multiple of the window: 64 = 4 x 14 + 8)."""
    size, height, width = windows.shape[3], grid.shape[1], grid.shape[2]
    by_window = windows.permute(0, 1, 3, 2, 4, 5)  # (B, rows, size, columns, size, C)
    pairs = []
    for row_windows, row_cells, row_grid in _spans(height, size):
        for col_windows, col_cells, col_grid in _spans(width, size):
            cells = by_window[:, row_windows, row_cells, col_windows, col_cells]
            part = grid[:, row_grid, col_grid].unflatten(1, cells.shape[1:3])
            pairs.append((part.unflatten(3, cells.shape[3:5]), cells))
    return pairs


def _spans(length: int, size: int) -> list[tuple[slice, slice, slice]]:
    """(windows, cells within a window, grid positions) along one side of ``length``."""
    whole, rest = divmod(length, size)
    spans = [(slice(0, whole), slice(0, size), slice(0, whole * size))] if whole else []
    if rest:
        spans.append((slice(whole, whole + 1), slice(0, rest), slice(whole * size, length)))
    return spans


def global_attention(
    self: Any, hidden_states: torch.Tensor, output_attentions: bool = False
) -> tuple[torch.Tensor, None]:
    """The module's own computation (its qkv, rel_pos_h/w, proj), the bias folded into q·k;
    ``hidden_states`` (B, H, W, C): the whole grid, or B windows of H x W."""
    batch, height, width, _ = hidden_states.shape
    heads, tokens = self.num_attention_heads, height * width
    qkv = self.qkv(hidden_states).reshape(batch, tokens, 3, heads, -1).permute(2, 0, 3, 1, 4)
    query, key, value = qkv.unbind(0)  # (B, heads, tokens, D), views of qkv
    dim = query.shape[-1]
    rows = self.get_rel_pos(height, height, self.rel_pos_h)  # (H, H, D): query row, key row
    columns = self.get_rel_pos(width, width, self.rel_pos_w)  # (W, W, D)
    grid = query.reshape(batch, heads, height, width, dim)
    by_row = torch.einsum("bnhwc,hkc->bnhwk", grid, rows).reshape(batch, heads, tokens, height)
    by_col = torch.einsum("bnhwc,wkc->bnhwk", grid, columns).reshape(batch, heads, tokens, width)
    # q', k' and v written once each into buffers of one head size, a multiple of 8 (the
    # fused kernels' rule: 64 + 14 + 14 = 92 becomes 96), the tail zero on both sides
    width_qk = -(-(dim + height + width) // 8) * 8
    parts = (dim, dim + height, dim + height + width)
    query_, key_ = _folded(query, width_qk, parts[2]), _folded(key, width_qk, parts[2])
    torch.mul(query, self.scale, out=query_[..., : parts[0]])
    query_[..., parts[0] : parts[1]] = by_row
    query_[..., parts[1] : parts[2]] = by_col
    key_[..., : parts[0]] = key
    row_of, col_of = _key_onehots(height, width, query)
    key_[..., parts[0] : parts[1]] = row_of
    key_[..., parts[1] : parts[2]] = col_of
    value_ = _folded(value, width_qk, dim)
    value_[..., :dim] = value
    out = F.scaled_dot_product_attention(query_, key_, value_, scale=1.0)[..., :dim]
    out = out.reshape(batch, heads, height, width, dim).permute(0, 2, 3, 1, 4)
    return self.proj(out.reshape(batch, height, width, -1)), None


def _folded(like: torch.Tensor, channels: int, zero_from: int) -> torch.Tensor:
    """(B, heads, tokens, channels) of ``like``'s kind, zero from column ``zero_from`` on (a
    zero tail adds nothing to q'·k' or to v); the columns before it are the caller's to write."""
    buffer = like.new_empty(*like.shape[:-1], channels)
    buffer[..., zero_from:].zero_()
    return buffer


def _key_onehots(height: int, width: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, 1, H·W, H) and (1, 1, H·W, W): the row and the column of each key, one-hot."""
    eye_h = torch.eye(height, device=like.device, dtype=like.dtype)
    eye_w = torch.eye(width, device=like.device, dtype=like.dtype)
    row_of = eye_h.repeat_interleave(width, dim=0)  # key (r, c) is row r
    col_of = eye_w.repeat(height, 1)  # ... and column c
    return row_of[None, None], col_of[None, None]
