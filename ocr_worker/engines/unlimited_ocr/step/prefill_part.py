"""A batched prefill's parts (one a sequence), shared by the runner and the fused kernels."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import torch
from torch.nn.attention.bias import causal_lower_right

log = structlog.get_logger(__name__)


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

    def attend_last(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> torch.Tensor:
        """q: (1, H, D), the part's last row, which sees every one of its rows -> (1, H, D)."""
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1)[None], keys.transpose(0, 1)[None], values.transpose(0, 1)[None]
        )  # (1, H, 1, D)
        return out[0].transpose(0, 1)


@dataclass(frozen=True)
class PrefillPass:
    """Every part of one prefill pass, packed for a single variable-length flash attention
    launch a layer. With a loop over the parts (two gathers, a causal bias and SDPA each), a
    pass of 8 groups took an H100's host 48 ms to launch, more than its ~45 ms of GPU work;
    with one launch, 36.5 ms (bench/RESULTS.md, runs F2 and F3)."""

    parts: list[PrefillPart]
    rows: torch.Tensor  # every part's rows, one part after another
    bounds: tuple[torch.Tensor, torch.Tensor]  # int32 (parts + 1,): where each part's q, k start
    longest: tuple[int, int]  # the most queries, and keys, of any part
    last_rows: torch.Tensor  # (parts,) each part's last token in the pass: its logits return

    def attend(self, q: torch.Tensor, k_layer: torch.Tensor, v_layer: torch.Tensor) -> torch.Tensor:
        """q: (T, H, D) of the pass; k_layer/v_layer: (pool rows, H, D) -> (T, H, D)."""
        global _varlen
        if _varlen and _flash_takes(q):
            try:
                # flash attention's causal mask is aligned to each part's last key: a part's
                # new rows see its past rows and, causally, each other
                return self._flash(q, k_layer, v_layer, self.bounds[0], self.longest[0], True)
            except RuntimeError as error:  # a build or card without the varlen flash kernels
                log.warning("prefill_varlen.disabled", error=str(error)[:300])
                _varlen = False
        return torch.cat([p.attend(q, k_layer[p.rows], v_layer[p.rows]) for p in self.parts])

    def attend_last(
        self, q: torch.Tensor, k_layer: torch.Tensor, v_layer: torch.Tensor
    ) -> torch.Tensor:
        """q: (parts, H, D), each part's last row -> (parts, H, D). The last layer needs no
        other row's output: only the last rows' logits are read, and every row's k and v are
        stored before its attention."""
        global _varlen_last
        if _varlen_last and _flash_takes(q):
            try:
                one_each = torch.arange(len(self.parts) + 1, device=q.device, dtype=torch.int32)
                # a last row sees all its part's rows: no mask
                return self._flash(q, k_layer, v_layer, one_each, 1, False)
            except RuntimeError as error:
                log.warning("prefill_varlen_last.disabled", error=str(error)[:300])
                _varlen_last = False
        return torch.cat(
            [
                p.attend_last(q[i : i + 1], k_layer[p.rows], v_layer[p.rows])
                for i, p in enumerate(self.parts)
            ]
        )

    def _flash(
        self,
        q: torch.Tensor,
        k_layer: torch.Tensor,
        v_layer: torch.Tensor,
        query_bounds: torch.Tensor,
        most_queries: int,
        causal: bool,
    ) -> torch.Tensor:
        """One varlen flash launch: each part's queries over its own rows."""
        return torch.ops.aten._flash_attention_forward(  # type: ignore[no-any-return]
            q,
            k_layer[self.rows],
            v_layer[self.rows],
            query_bounds,
            self.bounds[1],
            most_queries,
            self.longest[1],
            0.0,
            causal,
            False,
        )[0]


def _flash_takes(q: torch.Tensor) -> bool:
    return q.is_cuda and q.dtype in (torch.bfloat16, torch.float16)


# Off once the varlen kernel has failed in this process: for whole passes, for last rows.
_varlen = True
_varlen_last = True
