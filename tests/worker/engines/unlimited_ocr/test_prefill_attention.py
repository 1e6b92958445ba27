"""A prefill pass's Triton attention (prefill_attention.py) against SDPA part by part, on the
CPU through Triton's interpreter (the same kernel code the GPU compiles; test_gpu.py runs it
compiled at v1's sizes)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="compiled in test_gpu.py")
if not torch.cuda.is_available():  # tests/conftest.py sets it too, before triton's first import
    os.environ["TRITON_INTERPRET"] = "1"

from ocr_worker.engines.unlimited_ocr.kernels.prefill_attention import (  # noqa: E402
    paged_prefill_attention,
)
from ocr_worker.engines.unlimited_ocr.kernels.tuning import PrefillTile  # noqa: E402
from tests.worker.engines.unlimited_ocr.prefill_passes import packed_pass  # noqa: E402

HEADS, DIM = 10, 32  # v1 has 10 heads (of 128)


@pytest.fixture(autouse=True)
def _loop_bounds_read_from_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's key loops end where each part's rows end, read from memory. Triton 3.6's
    interpreter holds such scalars as 1-element arrays and makes loop bounds of them with
    int(), which NumPy 2.4 refuses for an array of one dimension; .item() takes the same one
    value (and still refuses a block of several). The compiled kernel is untouched."""
    from triton.runtime import interpreter

    patch_tensor = interpreter._patch_lang_tensor

    def patched(tensor: Any, scope: Any) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", patched)


def _pass(shapes: list[tuple[int, int]], seed: int):  # type: ignore[no-untyped-def]
    """Parts as the scheduler packs them, each (past rows, new rows), their rows scattered
    over a pool: (q, k_pool, v_pool, packed pass)."""
    g = torch.Generator().manual_seed(seed)
    pool_rows = 2 * sum(past + new for past, new in shapes)
    k_pool, v_pool = (torch.randn(pool_rows, HEADS, DIM, generator=g) for _ in range(2))
    packed = packed_pass(shapes, torch.randperm(pool_rows, generator=g))
    q = torch.randn(packed.parts[-1].end, HEADS, DIM, generator=g)
    return q, k_pool, v_pool, packed


def _attend(  # type: ignore[no-untyped-def]
    q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, packed, tile: PrefillTile
) -> torch.Tensor:
    return paged_prefill_attention(
        q, k_pool, v_pool, packed.rows, packed.bounds, packed.longest[0], tile
    )


@pytest.mark.parametrize(
    "tile",  # a block of queries wider than a part, and narrower; key tiles of 16 and 32
    [PrefillTile(16, 16, 4, 2), PrefillTile(32, 16, 4, 2), PrefillTile(64, 32, 4, 2)],
    ids=str,
)
def test_each_part_attends_to_its_own_rows_as_sdpa_does(tile: PrefillTile) -> None:
    """Four parts of ragged sizes: one with no past rows (causal over its own), three with past
    rows (a boundary page, seen whole by every new row, then causal); with 14, a block's first
    query sees 15 keys, one short of a 16-key tile, which must stay masked. A part that saw
    another's rows, a mask aligned to the wrong corner, or a block's masked tail read as keys
    changes the rows it touches by far more than the tolerance."""
    shapes = [(0, 45), (23, 37), (14, 30), (50, 9)]
    q, k_pool, v_pool, packed = _pass(shapes, seed=1)

    got = _attend(q, k_pool, v_pool, packed, tile)

    for part in packed.parts:
        expected = part.attend(q, k_pool[part.rows], v_pool[part.rows])
        torch.testing.assert_close(got[part.start : part.end], expected, rtol=1e-4, atol=1e-5)


def test_a_query_sees_no_later_row_of_its_part() -> None:
    """Changing a part's last key and value leaves every earlier query's output alone, and
    changes the last query's: the causal mask, not the tolerance, keeps them apart."""
    q, k_pool, v_pool, packed = _pass([(4, 40)], seed=2)
    tile = PrefillTile(16, 16, 4, 2)
    before = _attend(q, k_pool, v_pool, packed, tile)
    last = packed.rows[-1]
    k_pool[last], v_pool[last] = k_pool[last] + 3.0, v_pool[last] - 5.0

    after = _attend(q, k_pool, v_pool, packed, tile)

    torch.testing.assert_close(after[:-1], before[:-1], rtol=0, atol=0)
    assert (after[-1] - before[-1]).abs().max() > 0.1


def test_a_pass_with_no_new_rows_returns_nothing() -> None:
    q = torch.empty(0, HEADS, DIM)
    pool = torch.randn(4, HEADS, DIM)
    bounds = (torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32))
    out = paged_prefill_attention(q, pool, pool, torch.empty(0, dtype=torch.long), bounds, 0)
    assert out.shape == (0, HEADS, DIM)
