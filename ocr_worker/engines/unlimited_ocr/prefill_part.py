"""One sequence's share of a batched prefill, shared by the runner and the fused kernels."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PrefillPart:
    """Tokens ``start:end`` of the batch are this sequence's new rows; they attend to ``rows``
    (its past rows, then their own) under ``mask`` (T, P + T), or causally when it is None."""

    start: int
    end: int
    rows: torch.Tensor
    mask: torch.Tensor | None

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """q: (T, H, D) of the batch; keys/values: (P + T, H, D) of ``rows`` -> (T, H, D)."""
        out = torch.nn.functional.scaled_dot_product_attention(
            q[self.start : self.end].transpose(0, 1)[None],
            keys.transpose(0, 1)[None],
            values.transpose(0, 1)[None],
            attn_mask=self.mask,
            is_causal=self.mask is None,
        )  # (1, H, T, D)
        return out[0].transpose(0, 1)
