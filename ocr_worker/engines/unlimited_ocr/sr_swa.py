"""Sparse reference attention (SR-SWA), training-free for v1 weights.

Each decode step reads at most ``max_blocks`` prefix blocks plus the ring of recent tokens:
- the page gate restricts candidates to the blocks of the page being transcribed, when it has any;
- the block selector scores each candidate by an upper bound of q·k over the block (per-channel
  min/max of its keys, as in Quest), summed over heads, and keeps the best ``max_blocks``.
With a budget that covers every block the rows are returned untouched: exactly R-SWA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ocr_worker.engines.unlimited_ocr.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.sequence import Sequence

if TYPE_CHECKING:
    from ocr_worker.engines.unlimited_ocr.model_runner import ModelRunner


@dataclass(frozen=True)
class SrSwaSettings:
    max_blocks: int = 12  # 12 x 32 + 128 = 512 rows per step
    page_gate: bool = True


@dataclass(frozen=True)
class ReadPlan:
    """The prefix blocks a sequence may read this page; ``scored`` when more than the budget,
    so each layer's query picks among them."""

    blocks: list[WorkspaceBlocks]
    scored: bool


class BlockSelector:
    def __init__(self, settings: SrSwaSettings, *, block_size: int) -> None:
        self.settings = settings
        self.block_size = block_size
        self.rows_read_max = 0  # the most rows any query read, for tests and benchmarks

    def plan(self, sequence: Sequence) -> ReadPlan | None:
        """None: the budget covers every block, read them all (exactly R-SWA)."""
        blocks = self._candidates(sequence)
        total = sum(len(s.blocks.block_ids) for s in sequence.segments)
        if total <= self.settings.max_blocks and len(blocks) == total:
            return None
        if len(blocks) <= self.settings.max_blocks:
            self.rows_read_max = max(
                self.rows_read_max, sum(b.num_tokens for b in blocks) + sequence.window
            )
        return ReadPlan(blocks, scored=len(blocks) > self.settings.max_blocks)

    def select(
        self,
        runner: ModelRunner,
        layer: int,
        q: torch.Tensor,
        rows: torch.Tensor,
        valid: torch.Tensor,
        sequences: list[Sequence],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q: (B, H, D); rows/valid: (B, R). Returns the rows to read and their validity."""
        chosen = [self._rows_for(runner, layer, q[b], s) for b, s in enumerate(sequences)]
        if all(c is None for c in chosen):
            self.rows_read_max = max(self.rows_read_max, int(valid.sum(-1).max()))
            return rows, valid
        width = max(
            (c.numel() if c is not None else int(valid[b].sum())) for b, c in enumerate(chosen)
        )
        out_rows = torch.zeros(len(sequences), width, dtype=torch.long, device=rows.device)
        out_valid = torch.zeros(len(sequences), width, dtype=torch.bool, device=rows.device)
        for b, c in enumerate(chosen):
            picked = rows[b][valid[b]] if c is None else c
            out_rows[b, : picked.numel()], out_valid[b, : picked.numel()] = picked, True
        self.rows_read_max = max(self.rows_read_max, int(out_valid.sum(-1).max()))
        return out_rows, out_valid

    def _rows_for(
        self, runner: ModelRunner, layer: int, q: torch.Tensor, sequence: Sequence
    ) -> torch.Tensor | None:
        plan = self.plan(sequence)
        if plan is None:
            return None  # the budget covers everything: plain R-SWA
        best = self._best(runner, layer, q, plan.blocks)
        ring = runner.rows(sequence.ring, sequence.window)[: sequence.valid_ring_slots_after_feed()]
        return torch.cat([runner.rows(block) for block in best] + [ring])

    def _candidates(self, sequence: Sequence) -> list[WorkspaceBlocks]:
        """One WorkspaceBlocks per block (with its valid row count), page-gated."""
        segments = sequence.segments
        pages = [s for s in segments if s.kind == "page"]
        if self.settings.page_gate and pages:
            segments = [pages[min(sequence.guard.page_index, len(pages) - 1)]]
        return [block for s in segments for block in _split(s.blocks, self.block_size)]

    def _best(
        self, runner: ModelRunner, layer: int, q: torch.Tensor, blocks: list[WorkspaceBlocks]
    ) -> list[WorkspaceBlocks]:
        if len(blocks) <= self.settings.max_blocks:
            return blocks
        scores = []
        for block in blocks:
            keys = runner.k_pool[layer, runner.rows(block)].float()  # (n, H, D)
            low, high = keys.min(0).values, keys.max(0).values  # (H, D)
            qf = q.float()
            scores.append(torch.maximum(qf * low, qf * high).sum())
        keep = torch.stack(scores).topk(self.settings.max_blocks).indices.sort().values
        return [blocks[i] for i in keep.tolist()]


def _split(blocks: WorkspaceBlocks, block_size: int) -> list[WorkspaceBlocks]:
    """One WorkspaceBlocks per block, each with its own count of valid rows."""
    return [
        WorkspaceBlocks((block_id,), min(block_size, blocks.num_tokens - i * block_size))
        for i, block_id in enumerate(blocks.block_ids)
    ]
