"""What a decode step's layers read besides the tokens, in one Triton kernel (GPU, or Triton's
interpreter in tests): each sequence's ring slot for the new k and v, which of its rows count,
and the rotary cos/sin at its position.

In torch's ops these were ~15 launches at the head of every step (the slot's modulo and gather,
five elementwise passes over the (B, R) row table, the rotary angles' product, concatenation,
cos, sin and casts), each a few µs on the card at any batch. The rotary values come from a
table that ``rotary_table`` computes once with the torch ops the step used, so they are the
same values bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

from ocr_worker.engines.unlimited_ocr.step.batch_rows import BatchRows

COLUMNS = 1024  # row-table columns a program marks valid or not


def rotary_table(
    rotary: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    positions: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, (positions, D), for every position a sequence may reach."""
    return rotary(torch.arange(positions, device=device))


@triton.jit
def _step_inputs(
    positions_ptr,
    generated_ptr,  # (B,) tokens generated with this one: its ring slot is (n - 1) % window
    ring_rows_ptr,  # (B, window)
    prefix_valid_ptr,  # (B, R) u8
    ring_column_ptr,  # (B, R): the ring slot a column holds, or -1
    cos_table_ptr,
    sin_table_ptr,  # (positions, DIM)
    write_rows_ptr,  # out (B,)
    valid_ptr,  # out (B, R) u8
    cos_ptr,
    sin_ptr,  # out (B, DIM)
    width,
    window,
    table_rows,
    DIM: tl.constexpr,
    DIM_POW2: tl.constexpr,
    COLUMNS: tl.constexpr,
):
    b, part = tl.program_id(0), tl.program_id(1)
    generated = tl.load(generated_ptr + b)
    # Ring slots hold the min(n, window) most recent generated tokens, this one included.
    seen = tl.minimum(generated, window)
    columns = part * COLUMNS + tl.arange(0, COLUMNS)
    inside = columns < width
    at = b.to(tl.int64) * width + columns
    prefix = tl.load(prefix_valid_ptr + at, mask=inside, other=0) != 0
    ring = tl.load(ring_column_ptr + at, mask=inside, other=-1)
    valid = prefix | ((ring >= 0) & (ring < seen))
    tl.store(valid_ptr + at, valid.to(tl.uint8), mask=inside)
    if part == 0:
        slot = (generated - 1) % window
        tl.store(write_rows_ptr + b, tl.load(ring_rows_ptr + b * window + slot))
        d = tl.arange(0, DIM_POW2)
        real = d < DIM
        # Scheduler.submit keeps every position inside the table; clamped all the same, so a
        # broken promise reads a wrong angle, never memory past the table.
        source = tl.minimum(tl.load(positions_ptr + b), table_rows - 1) * DIM + d
        tl.store(cos_ptr + b * DIM + d, tl.load(cos_table_ptr + source, mask=real), mask=real)
        tl.store(sin_ptr + b * DIM + d, tl.load(sin_table_ptr + source, mask=real), mask=real)


def step_inputs(
    positions: torch.Tensor,
    generated: torch.Tensor,
    batch: BatchRows,
    table: tuple[torch.Tensor, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(write_rows (B,), valid (B, R) bool, cos (B, D), sin (B, D)) for B sequences at
    ``positions`` with ``generated`` tokens each (the one fed now included)."""
    count, width = batch.rows.shape
    cos_table, sin_table = table
    dim = cos_table.shape[1]
    device = positions.device
    write_rows = torch.empty(count, dtype=batch.ring_rows.dtype, device=device)
    valid = torch.empty(count, width, dtype=torch.bool, device=device)
    cos = torch.empty(count, dim, dtype=cos_table.dtype, device=device)
    sin = torch.empty_like(cos)
    _step_inputs[(count, triton.cdiv(width, COLUMNS))](
        positions,
        generated,
        batch.ring_rows.contiguous(),
        batch.prefix_valid.contiguous().view(torch.uint8),
        batch.ring_column.contiguous(),
        cos_table,
        sin_table,
        write_rows,
        valid.view(torch.uint8),
        cos,
        sin,
        width,
        batch.window,
        cos_table.shape[0],
        DIM=dim,
        DIM_POW2=triton.next_power_of_2(dim),
        COLUMNS=COLUMNS,
    )
    return write_rows, valid, cos, sin
