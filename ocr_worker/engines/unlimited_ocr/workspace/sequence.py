"""One decoding sequence (a page group of one document) and the segments of its prefix.

Torch-free: positions, block ownership and the R-SWA ring bookkeeping. The ModelRunner reads
these to build its gather indices; the scheduler moves sequences between waiting and running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks


@dataclass
class Segment:
    """A run of prefix rows: ``kind`` is bos, page or prompt; rows sit at ``first_position``+."""

    kind: str
    blocks: WorkspaceBlocks
    first_position: int
    page_no: int | None = None

    @property
    def num_tokens(self) -> int:
        return self.blocks.num_tokens


@dataclass
class Sequence:
    seq_id: str
    segments: list[Segment]
    ring: WorkspaceBlocks  # ``window`` slots for the most recent generated tokens
    window: int
    guard: PageGuard
    max_new_tokens: int
    next_position: int = 0  # position of the next token fed to the model
    generated: list[int] = field(default_factory=list)
    wanted: list[int] = field(default_factory=list)  # the model's own choices, before the guard

    @property
    def prefix_length(self) -> int:
        return sum(s.num_tokens for s in self.segments)

    @property
    def finished(self) -> bool:
        return self.guard.finished or len(self.generated) >= self.max_new_tokens

    def ring_slot(self, generated_index: int) -> int:
        return generated_index % self.window

    def valid_ring_slots_after_feed(self) -> int:
        """Ring slots valid once the last sampled token is written: the ``window`` most recent
        generated tokens, itself included."""
        return min(len(self.generated), self.window)
