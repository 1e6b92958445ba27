"""A straightforward reference: full recompute with the R-SWA rule, dense, no cache, no blocks.

Every step recomputes every row of the sequence from its embeddings (plus optional fixed past
rows), with an explicit mask: prefix rows are causal; a generated row sees the whole prefix and
the ``window`` most recent generated rows, itself included.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.models.unlimited_ocr.modeling_unlimited_ocr import apply_rotary_pos_emb


@dataclass
class Past:
    """Fixed rows seen by everything after them: raw (pre-RoPE) keys, values, positions."""

    raw_keys: list[torch.Tensor]  # per layer (N, H, D)
    values: list[torch.Tensor]
    positions: torch.Tensor


def forward(
    model,
    embeds: torch.Tensor,
    positions: torch.Tensor,
    prefix_len: int,
    window: int,
    past: Past | None = None,
) -> tuple[torch.Tensor, list, list]:  # type: ignore[no-untyped-def]
    """embeds (T, hidden) at ``positions``; returns last-row logits and per-layer raw K, V."""
    text = model.model.language_model
    heads, dim = text.config.num_attention_heads, text.config.head_dim
    n_past = 0 if past is None else past.positions.numel()
    t = embeds.shape[0]
    mask = torch.full((t, n_past + t), float("-inf"))
    mask[:, :n_past] = 0
    for i in range(t):
        for j in range(t):
            generated_i, generated_j = i - prefix_len, j - prefix_len
            if j <= i and (j < prefix_len or generated_i - generated_j < window):
                mask[i, n_past + j] = 0
    all_positions = positions if past is None else torch.cat([past.positions, positions])
    cos, sin = text.rotary_emb(embeds[None], all_positions[None])
    x = embeds[None]
    raw_keys, values = [], []
    for index, layer in enumerate(text.layers):
        h = layer.input_layernorm(x)
        q = layer.self_attn.q_proj(h).view(1, t, heads, dim).transpose(1, 2)
        k = layer.self_attn.k_proj(h).view(1, t, heads, dim).transpose(1, 2)
        v = layer.self_attn.v_proj(h).view(1, t, heads, dim).transpose(1, 2)
        raw_keys.append(k[0].transpose(0, 1))
        values.append(v[0].transpose(0, 1))
        if past is not None:
            k = torch.cat([past.raw_keys[index].transpose(0, 1)[None], k], dim=2)
            v = torch.cat([past.values[index].transpose(0, 1)[None], v], dim=2)
        q, _ = apply_rotary_pos_emb(q, q, cos[:, n_past:], sin[:, n_past:])
        _, k = apply_rotary_pos_emb(k, k, cos, sin)
        scores = q @ k.transpose(-1, -2) / dim**0.5 + mask
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, t, -1)
        x = x + layer.self_attn.o_proj(out)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    logits = model.lm_head(text.norm(x))[0, -1]
    return logits, raw_keys, values


@torch.no_grad()
def greedy(
    model,
    prefix: torch.Tensor,
    steps: int,
    window: int,
    banned: tuple[int, ...] = (),
    past: Past | None = None,
    first_position: int = 0,
) -> list[int]:  # type: ignore[no-untyped-def]
    """Greedy ids after ``prefix`` (P, hidden), recomputing everything at every step."""
    embed = model.model.language_model.embed_tokens
    generated: list[int] = []
    for _ in range(steps):
        rows = prefix if not generated else torch.cat([prefix, embed(torch.tensor(generated))])
        positions = torch.arange(first_position, first_position + rows.shape[0])
        logits, _, _ = forward(model, rows, positions, prefix.shape[0], window, past)
        logits[list(banned)] = float("-inf")
        generated.append(int(logits.argmax()))
    return generated


def pair_plan(ids: torch.Tensor, experts: int) -> torch.Tensor:
    """moe_kernels.pair_plan's table by torch's ops: where each expert's pairs start (an id
    out of range counted with the nearest real expert), then the pairs by a stable argsort."""
    flat = ids.flatten().long().clamp(0, experts - 1)
    starts = torch.zeros(experts + 1, dtype=torch.long, device=ids.device)
    starts[1:] = torch.bincount(flat, minlength=experts).cumsum(0)
    return torch.cat([starts, torch.argsort(flat, stable=True)])
