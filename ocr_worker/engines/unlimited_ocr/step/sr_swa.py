"""Sparse reference attention (SR-SWA), training-free for v1 weights.

v1 was trained with R-SWA (every step reads the whole prefix), so this is an opt-in
approximation on v1 weights, for speed, and no model's trained rule: 2.0 checkpoints are refused
at load (docs/model.md, "Which model"). Each decode step reads:
- always the BOS (the first token: an attention sink that trained models lean on) and the
  prompt (the instruction), whatever the budget;
- at most ``max_blocks`` other prefix blocks: the page gate restricts the candidates to the
  blocks of the page being transcribed, when it has any; the block selector scores each
  candidate by an upper bound of q·k over the block (per-channel min/max of its keys, as in
  Quest), summed over heads, and keeps the best ``max_blocks``;
- the ring of the ``window`` most recent generated tokens.
With a budget that covers every block the rows are returned untouched: exactly R-SWA.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ocr_worker.engines.unlimited_ocr.step.decode_rule import KeyPool, ReadPlan
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Sequence


@dataclass(frozen=True)
class SrSwaSettings:
    max_blocks: int = 12  # 12 x 32 + 128 = 512 rows per step
    page_gate: bool = True


ALWAYS_READ = ("bos", "prompt")  # segment kinds every step reads


class BlockSelector:
    """SR-SWA as a ``DecodeRule`` (decode_rule.py): its rows follow the page being read."""

    name = "sr-swa"
    follows_page = True

    def __init__(self, settings: SrSwaSettings, *, block_size: int) -> None:
        self.settings = settings
        self.block_size = block_size
        self.rows_read_max = 0  # the most rows any query read, for tests and benchmarks

    def plan(self, sequence: Sequence) -> ReadPlan | None:
        """None: the budget covers every block, read them all (exactly R-SWA)."""
        always, candidates = self._candidates(sequence)
        total = sum(len(s.blocks.block_ids) for s in sequence.segments)
        within_budget = len(candidates) <= self.settings.max_blocks
        if within_budget and len(always) + len(candidates) == total:
            return None
        plan = ReadPlan(always, candidates, scored=not within_budget)
        if within_budget:
            self.rows_read_max = max(
                self.rows_read_max, sum(b.num_tokens for b in plan.blocks) + sequence.window
            )
        return plan

    def select(
        self,
        runner: KeyPool,
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
        self, runner: KeyPool, layer: int, q: torch.Tensor, sequence: Sequence
    ) -> torch.Tensor | None:
        plan = self.plan(sequence)
        if plan is None:
            return None  # the budget covers everything: plain R-SWA
        best = self._best(runner, layer, q, plan.candidates)
        ring = runner.host_rows(sequence.ring, sequence.window)
        ring = ring[: sequence.valid_ring_slots_after_feed()]
        chosen = [runner.host_rows(block) for block in plan.always + best]
        return runner.to_device(np.concatenate([*chosen, ring]))

    def _candidates(
        self, sequence: Sequence
    ) -> tuple[list[WorkspaceBlocks], list[WorkspaceBlocks]]:
        """(always read, candidates): one WorkspaceBlocks per block, with its valid row count.
        The page gate narrows the candidates to the page whose section is being written only
        when the budget cannot cover them all: a budget that covers every block is R-SWA."""
        always = [s for s in sequence.segments if s.kind in ALWAYS_READ]
        others = [s for s in sequence.segments if s.kind not in ALWAYS_READ]
        candidates = [block for s in others for block in _split(s.blocks, self.block_size)]
        pages = [s for s in others if s.kind == "page"]
        if self.settings.page_gate and pages and len(candidates) > self.settings.max_blocks:
            page = pages[min(sequence.guard.current_page, len(pages) - 1)]
            candidates = _split(page.blocks, self.block_size)
        return [block for s in always for block in _split(s.blocks, self.block_size)], candidates

    def _best(
        self, runner: KeyPool, layer: int, q: torch.Tensor, blocks: list[WorkspaceBlocks]
    ) -> list[WorkspaceBlocks]:
        if len(blocks) <= self.settings.max_blocks:
            return blocks
        # Every block's rows in one (blocks, block_size) table; a partial block repeats its
        # first row in the unused slots, which leaves its key bounds as they are.
        table = np.stack([_padded(runner.host_rows(block), self.block_size) for block in blocks])
        keys = runner.k_pool[layer, runner.to_device(table)].float()  # (n, block_size, H, D)
        low, high = keys.amin(1), keys.amax(1)  # (n, H, D)
        qf = q.float()
        scores = torch.maximum(qf * low, qf * high).sum((1, 2))
        keep = scores.topk(self.settings.max_blocks).indices.sort().values
        return [blocks[i] for i in keep.tolist()]


def _padded(rows: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([rows, np.repeat(rows[:1], size - rows.size)])


def _split(blocks: WorkspaceBlocks, block_size: int) -> list[WorkspaceBlocks]:
    """One WorkspaceBlocks per block, each with its own count of valid rows."""
    return [
        WorkspaceBlocks((block_id,), min(block_size, blocks.num_tokens - i * block_size))
        for i, block_id in enumerate(blocks.block_ids)
    ]
