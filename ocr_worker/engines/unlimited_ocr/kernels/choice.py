"""A step's token choice on the GPU in two Triton kernels (GPU, or Triton's interpreter in tests).

sampling.choose in torch ops was a dozen launches a step from the host: two argmaxes of the
129k-wide rows (the model's own choice, then one with the guard's bans), a clone of the logits
to ban ids in, the forced ids laid over, the two stacked. Here the guard's decision travels as
one small table (a row's forced id, then its banned ids), and two kernels give both choices:
each program finds the largest logit of one slice of one row, with and without the row's bans;
one program a row then takes the first slice holding the row's largest, so ties go to the
lowest id, as ``argmax`` breaks them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Logits one program reads: 32 programs a row at v1's 129,280 ids. At 1,024 (127 a row) the
# 16k programs of a 128-sequence step took 102 µs on the H200, paced by starting programs.
SLICE = 4096
PAST_ANY_ID = tl.constexpr(2**30)  # larger than any id: what tl.min ignores
NO_ID = tl.constexpr(-1)  # the table's first column where the guard forces nothing; its padding


@triton.jit
def _first_largest(values, ids, NONE: tl.constexpr):
    """(largest, its id) by argmax's rule: the lowest id among equal values, and a NaN, the
    largest of all (a NaN row yields a NaN's id, never an id outside the vocabulary)."""
    nan = values != values
    any_nan = tl.max(nan.to(tl.int32), axis=0) > 0
    top = tl.max(tl.where(nan, float("-inf"), values), axis=0)
    hit = tl.where(any_nan, nan, values == top)
    return tl.where(any_nan, float("nan"), top), tl.min(tl.where(hit, ids, NONE), axis=0)


@triton.jit
def _slice_best(
    logits_ptr,
    table_ptr,  # (B, columns): the forced id, then the banned ids, -1 padded
    best_ptr,  # (2, B, slices) fp32: the slice's largest logit, without and with the bans
    where_ptr,  # (2, B, slices) int32: where it lies (the lowest id of equal ones)
    vocab,
    slices,
    rows,
    columns,
    BANS_POW2: tl.constexpr,
    SLICE: tl.constexpr,
):
    row, part = tl.program_id(0), tl.program_id(1)
    ids = part * SLICE + tl.arange(0, SLICE)
    x = tl.load(logits_ptr + row.to(tl.int64) * vocab + ids, mask=ids < vocab, other=float("-inf"))
    x = x.to(tl.float32)
    masked = x
    for column in tl.static_range(1, BANS_POW2 + 1):  # a ban at a time: no (SLICE, bans) tile
        ban = tl.load(table_ptr + row * columns + column, mask=column < columns, other=NO_ID)
        masked = tl.where(ids == ban, float("-inf"), masked)
    out = row * slices + part
    top, where = _first_largest(x, ids, PAST_ANY_ID)
    tl.store(best_ptr + out, top)
    tl.store(where_ptr + out, where)
    top, where = _first_largest(masked, ids, PAST_ANY_ID)
    tl.store(best_ptr + rows * slices + out, top)
    tl.store(where_ptr + rows * slices + out, where)


@triton.jit
def _row_choice(
    best_ptr,
    where_ptr,
    table_ptr,
    picks_ptr,  # (2, B) int64: the model's own choice, then the one fed next
    vocab,
    slices,
    rows,
    columns,
    SLICES_POW2: tl.constexpr,
):
    row = tl.program_id(0)
    part = tl.arange(0, SLICES_POW2)
    inside = part < slices
    for kind in tl.static_range(2):  # 0: without the bans, 1: with them
        at = kind * rows * slices + row * slices + part
        best = tl.load(best_ptr + at, mask=inside, other=float("-inf"))
        first = _first_largest(best, part, SLICES_POW2)[1]
        pick = tl.load(where_ptr + kind * rows * slices + row * slices + first).to(tl.int64)
        pick = tl.minimum(pick, vocab - 1)  # cannot happen (a slice's ids are real): a guard
        if kind == 1:
            forced = tl.load(table_ptr + row * columns).to(tl.int64)
            pick = tl.where(forced != NO_ID, forced, pick)
        tl.store(picks_ptr + kind * rows + row, pick)


def choose_on_device(logits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """logits (B, V); table (B, 1 + bans) int32 on the same device: each row's forced id or
    NO_ID, then its banned ids padded with NO_ID. Returns (2, B) int64: each row's
    argmax, then its argmax over the ids not banned, or the forced id."""
    rows, vocab = logits.shape
    columns = table.shape[1]
    slices = triton.cdiv(vocab, SLICE)
    best = torch.empty(2, rows, slices, device=logits.device, dtype=torch.float32)
    where = torch.empty(2, rows, slices, device=logits.device, dtype=torch.int32)
    picks = torch.empty(2, rows, device=logits.device, dtype=torch.int64)
    logits = logits.contiguous()
    _slice_best[(rows, slices)](
        logits,
        table,
        best,
        where,
        vocab,
        slices,
        rows,
        columns,
        # a runtime width, rounded up: a new ban count compiles nothing mid-decode (8 cover
        # the usual EOS and n-gram bans)
        BANS_POW2=max(8, triton.next_power_of_2(columns - 1)),
        SLICE=SLICE,
        num_warps=8,
    )
    _row_choice[(rows,)](
        best,
        where,
        table,
        picks,
        vocab,
        slices,
        rows,
        columns,
        SLICES_POW2=triton.next_power_of_2(slices),
    )
    return picks
