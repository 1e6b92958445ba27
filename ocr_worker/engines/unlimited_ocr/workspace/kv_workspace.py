"""The visual KV workspace: a fixed pool of KV blocks, handed out per segment (torch-free).

One pool per GPU is allocated once, sized by ``visual_cache_workspace_gb``; this class only
decides which block ids belong to whom (the tensors live in the ModelRunner). A sequence's
prefix is made of segments (BOS, one per page, the prompt), each in whole blocks, so the blocks
of one page can go back to the pool when its page group no longer needs it. ``None`` from
``allocate`` means "no room now, wait"; misuse (double free) raises.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkspaceBlocks:
    """Blocks holding ``num_tokens`` rows of one segment, in order."""

    block_ids: tuple[int, ...]
    num_tokens: int


class WorkspaceError(RuntimeError):
    pass


class VisualKVWorkspace:
    def __init__(self, *, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need positive sizes, got {num_blocks=} {block_size=}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0 first
        self._owner: dict[int, str] = {}
        self.peak_used = 0

    @classmethod
    def from_bytes(
        cls, *, workspace_bytes: int, bytes_per_token: int, block_size: int
    ) -> VisualKVWorkspace:
        return cls(
            num_blocks=workspace_bytes // (bytes_per_token * block_size), block_size=block_size
        )

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def can_allocate(self, num_tokens: int) -> bool:
        return self.blocks_for(num_tokens) <= len(self._free)

    def allocate(self, owner: str, num_tokens: int) -> WorkspaceBlocks | None:
        needed = self.blocks_for(num_tokens)
        if needed > self.num_blocks:
            raise WorkspaceError(
                f"{num_tokens} tokens need {needed} blocks; "
                f"the whole workspace has {self.num_blocks}"
            )
        if needed > len(self._free):
            return None
        ids = tuple(self._free.pop() for _ in range(needed))
        for block_id in ids:
            self._owner[block_id] = owner
        self.peak_used = max(self.peak_used, self.num_used)
        return WorkspaceBlocks(ids, num_tokens)

    def free(self, blocks: WorkspaceBlocks) -> None:
        for block_id in blocks.block_ids:
            if self._owner.pop(block_id, None) is None:
                raise WorkspaceError(f"block {block_id} freed twice or never allocated")
            self._free.append(block_id)

    def owned_by(self, owner: str) -> int:
        return sum(1 for who in self._owner.values() if who == owner)
