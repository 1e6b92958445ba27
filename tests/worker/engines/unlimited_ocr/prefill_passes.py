"""A prefill pass packed as the scheduler packs one (ModelRunner.prefill), for the tests and
benches of a pass's attention: the runner builds its own from the host in one copy."""

from __future__ import annotations

import torch

from ocr_worker.engines.unlimited_ocr.step.prefill_part import PrefillPart, PrefillPass


def packed_pass(shapes: list[tuple[int, int]], pool_rows: torch.Tensor) -> PrefillPass:
    """Parts of ``shapes``, each (past rows, new rows), handed ``pool_rows`` in turn: a part's
    past rows, then its new ones. Bounds and last rows on ``pool_rows``' device."""
    parts, start, taken = [], 0, 0
    for past, new in shapes:
        parts.append(PrefillPart(start, start + new, pool_rows[taken : taken + past + new], past))
        start, taken = start + new, taken + past + new
    queries = [new for _, new in shapes]
    keys = [past + new for past, new in shapes]
    device = pool_rows.device
    bounds = torch.tensor(
        [[0, *torch.tensor(queries).cumsum(0)], [0, *torch.tensor(keys).cumsum(0)]],
        dtype=torch.int32,
        device=device,
    )
    lasts = torch.tensor([p.end - 1 for p in parts], device=device)
    return PrefillPass(
        parts, pool_rows[:taken], (bounds[0], bounds[1]), (max(queries), max(keys)), lasts
    )
