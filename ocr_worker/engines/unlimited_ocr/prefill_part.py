"""One sequence's share of a batched prefill, shared by the runner and the fused kernels."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.attention.bias import causal_lower_right


@dataclass(frozen=True)
class PrefillPart:
    """Tokens ``start:end`` of the batch are this sequence's new rows; they attend to ``rows``
    (its ``past`` rows, then their own): every past row, and causally each other."""

    start: int
    end: int
    rows: torch.Tensor
    past: int = 0

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """q: (T, H, D) of the batch; keys/values: (P + T, H, D) of ``rows`` -> (T, H, D)."""
        count = self.end - self.start
        # Causal aligned to the last key: SDPA runs it in its flash kernels, where an explicit
        # (T, P + T) mask would be materialised and take the slower masked path.
        causal = causal_lower_right(count, self.past + count) if self.past else None
        out = torch.nn.functional.scaled_dot_product_attention(
            q[self.start : self.end].transpose(0, 1)[None],
            keys.transpose(0, 1)[None],
            values.transpose(0, 1)[None],
            attn_mask=causal,
            is_causal=causal is None,
        )  # (1, H, T, D)
        return out[0].transpose(0, 1)
