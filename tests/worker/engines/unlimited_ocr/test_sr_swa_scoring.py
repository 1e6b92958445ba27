"""SR-SWA's block scoring over a real key pool: which candidate blocks a query keeps."""

from __future__ import annotations

import numpy as np
import torch

from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment, Sequence

BLOCK, HEADS, DIM = 4, 2, 8


class _Pool:
    """The runner's side of the selector: one layer's keys, rows by block."""

    def __init__(self, rows: int) -> None:
        self.k_pool = 0.1 * torch.randn(
            1, rows, HEADS, DIM, generator=torch.Generator().manual_seed(0)
        )

    def host_rows(self, blocks: WorkspaceBlocks, count: int | None = None) -> np.ndarray:
        count = blocks.num_tokens if count is None else count
        ids = np.asarray(blocks.block_ids)
        return (ids[:, None] * BLOCK + np.arange(BLOCK)).reshape(-1)[:count]

    def to_device(self, host: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(host).clone()


def _sequence() -> Sequence:
    """BOS (block 0), one page of five blocks (1-5, the last holding 2 of its 4 rows), the
    prompt (6); the ring is blocks 7-8."""
    guard = PageGuard(
        num_pages=1, eos_id=1, marker_ids=(9,), page_budget=100, token_text=lambda t: " x"
    )
    segments = [
        Segment("bos", WorkspaceBlocks((0,), 1), 0),
        Segment("page", WorkspaceBlocks((1, 2, 3, 4, 5), 18), 1, page_no=1),
        Segment("prompt", WorkspaceBlocks((6,), 3), 19),
    ]
    return Sequence("s", segments, WorkspaceBlocks((7, 8), 8), 8, guard, 100)


def _read(pool: _Pool, q: torch.Tensor) -> set[int]:
    """The pool rows the query reads with a budget of two page blocks."""
    selector = BlockSelector(SrSwaSettings(max_blocks=2, page_gate=False), block_size=BLOCK)
    placeholder = torch.zeros(1, 1, dtype=torch.long)
    rows, valid = selector.select(pool, 0, q[None], placeholder, placeholder.bool(), [_sequence()])
    return set(rows[0][valid[0]].tolist())


def _block(block_id: int, count: int = BLOCK) -> set[int]:
    return set(range(block_id * BLOCK, block_id * BLOCK + count))


def test_a_query_keeps_the_blocks_holding_the_keys_it_matches_best() -> None:
    pool = _Pool(rows=9 * BLOCK)
    q = torch.ones(HEADS, DIM)
    pool.k_pool[0, 2 * BLOCK + 1] = 3.0  # one row of block 2 and one of block 4 match q
    pool.k_pool[0, 4 * BLOCK + 3] = 2.0
    read = _read(pool, q)
    always = _block(0, 1) | _block(6, 3)  # BOS and prompt, then the ring's valid slots (none)
    assert read == always | _block(2) | _block(4)


def test_rows_past_a_partial_blocks_count_do_not_score() -> None:
    pool = _Pool(rows=9 * BLOCK)
    q = torch.ones(HEADS, DIM)
    pool.k_pool[0, 5 * BLOCK + 3] = 50.0  # block 5 holds two rows: this one is stale
    pool.k_pool[0, 1 * BLOCK] = 3.0
    pool.k_pool[0, 3 * BLOCK + 2] = 2.0
    assert _read(pool, q) - _block(0, 1) - _block(6, 3) == _block(1) | _block(3)
    pool.k_pool[0, 5 * BLOCK + 1] = 50.0  # one of its own rows: now it counts
    assert _read(pool, q) - _block(0, 1) - _block(6, 3) == _block(1) | _block(5, 2)
