from __future__ import annotations

import pytest

from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import (
    VisualKVWorkspace,
    WorkspaceError,
)


def test_blocks_are_handed_out_and_returned_exactly() -> None:
    pool = VisualKVWorkspace(num_blocks=8, block_size=32)
    first = pool.allocate("seq-a", 100)
    assert first is not None and first.block_ids == (0, 1, 2, 3) and first.num_tokens == 100
    second = pool.allocate("seq-b", 64)
    assert second is not None and second.block_ids == (4, 5)
    assert (pool.num_used, pool.num_free, pool.owned_by("seq-a")) == (6, 2, 4)
    pool.free(first)
    assert pool.num_free == 6 and pool.peak_used == 6
    with pytest.raises(WorkspaceError, match="freed twice"):
        pool.free(first)


def test_a_full_pool_says_wait_and_an_impossible_request_says_misuse() -> None:
    pool = VisualKVWorkspace(num_blocks=4, block_size=16)
    held = pool.allocate("a", 64)
    assert held is not None and pool.allocate("b", 1) is None  # wait for blocks
    pool.free(held)
    assert pool.allocate("b", 1) is not None
    with pytest.raises(WorkspaceError, match="whole workspace has 4"):
        pool.allocate("c", 65)


def test_size_from_bytes() -> None:
    pool = VisualKVWorkspace.from_bytes(
        workspace_bytes=4 * 2**30, bytes_per_token=60 * 1024, block_size=32
    )
    assert pool.num_blocks == 2184  # 4 GiB / (60 KiB x 32)
