"""Every kernel's tiles and launch plans, one table a card.

The engine's choices come from timing them on each card (bench/RESULTS.md, "GPU engine:
kernels"), not from Triton's autotuner at run time: the engine first runs a shape in a CUDA
graph's warm-up, whose padding rows read one masked row, and a choice timed on that workload
left the step no faster on real rows. A card not listed (or the CPU, for the interpreter's
tests) takes the H200's table.

The kinds of choice live here too (``Tile``, ``AttentionPlan``, ``Tiles``, ``PrefillTile``),
with the sets of them the benches time and the sm_90 build test compiles, so that a new card's
table is written in one place.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

# -- decode attention (decode_attention.py) -------------------------------------------------


class Tile(NamedTuple):
    """How a decode-attention program runs its slice: ``block`` rows a tile; ``mma``: the
    tile's two products on the tensor cores, the query padded to QUERY_ROWS rows. The padding
    is wasted work, but it is the form Triton's pipeliner knows: the next tiles' K and V are
    copied into shared memory ahead (``stages``) while this tile is reduced, so a program keeps
    tiles in flight; the plain form (products on the CUDA cores) waits on each tile's loads."""

    block: int
    warps: int
    stages: int = 3
    mma: bool = False


# The tiles bench/engine/attention_bench.py times (and the sm_90 build test compiles).
TILES = [
    Tile(16, 2),
    Tile(32, 4),
    Tile(64, 4),
    Tile(64, 8),
    Tile(128, 8),
    Tile(16, 1, mma=True),
    Tile(16, 2, mma=True),
    Tile(16, 2, 4, mma=True),
    Tile(32, 1, mma=True),
    Tile(32, 2, mma=True),
    Tile(32, 4, mma=True),
    Tile(64, 8, mma=True),
]


class AttentionPlan(NamedTuple):
    """How a step of up to ``up_to`` sequences launches: its tile, and the programs it aims
    for (decode_attention.attention_slices): enough slices a head to fill the card, few enough
    that the last wave is not left mostly idle."""

    up_to: int
    tile: Tile
    programs: int


ANY = 1 << 30  # a plan for every larger step

# -- the experts (moe.py) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tiles:
    """Tile widths and launch shape of the expert kernels (bench/engine/mlp_bench.py compares
    some)."""

    gate_up_n: int = 32
    down_n: int = 64
    k: int = 128
    warps: int = 4
    stages: int = 3
    # Read pair_plan's table even below SORT_PAIRS_ABOVE: one small launch, against a scan of
    # the top-k table in every program (which grows with the programs, the narrower the tiles).
    plan: bool = False
    # Each tile computed transposed (weights · rowsᵀ): the weights' BLOCK_N rows are the MMA's
    # M side and a step's ≤ 32 pairs its N side, instead of padding those pairs to M. Hopper's
    # warpgroup MMA needs M ≥ 64: only tiles 64 wide or more get it (32-wide stay mma.sync).
    swap: bool = False


# -- a prefill pass's attention (prefill_attention.py) ----------------------------------------


class PrefillTile(NamedTuple):
    """A program's queries (BLOCK_M) and the keys a loop step takes (BLOCK_N)."""

    queries: int
    keys: int
    warps: int
    stages: int


# The tiles bench/engine/prefill_attention_bench.py times (and the sm_90 build test compiles).
PREFILL_TILES = [
    PrefillTile(64, 64, 4, 3),
    PrefillTile(128, 64, 4, 3),
    PrefillTile(128, 64, 4, 4),
    PrefillTile(128, 32, 4, 3),
    PrefillTile(128, 64, 8, 3),
    PrefillTile(128, 128, 8, 2),
]

# -- the tables -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CardTuning:
    """One card's choices for every kernel the step and the prefill launch."""

    # Decode attention by step size, the first plan whose ``up_to`` holds the step (end at ANY).
    attention: tuple[AttentionPlan, ...]
    # The experts by the rows a launch multiplies (moe.tiles_for): a step of up to
    # moe.FEW_TOKENS sequences, one of more, and a prefill's thousands (PREFILL_MOE "kernels").
    moe_few_tokens: Tiles
    moe_many_tokens: Tiles
    moe_prefill: Tiles
    prefill_attention: PrefillTile


# The experts' tiles, timed with bench/engine/mlp_bench.py and in whole steps (RESULTS.md, "GPU
# engine: kernels"). A step of few sequences, where few experts work: narrow tiles, a deeper
# pipeline (H200: 46 µs a layer at 1 token, 119 at 16). A step of many, where every expert has
# a dozen pairs: each tile transposed onto Hopper's warpgroup MMA over pair_plan's table,
# 64-deep slices of K, four stages (H100, 2026-12-06: 189.7 µs a layer at 128 tokens against
# 201.6, the 128-sequence step 7.89 ms against 8.24; six stages were as fast in 1.5x the shared
# memory). A prefill's: wide tiles, eight warps, not timed at a prefill's sizes. Both cards
# take the same: neither has timed faster ones of its own yet.
_MOE_FEW_TOKENS = Tiles(stages=4)
_MOE_MANY_TOKENS = Tiles(gate_up_n=64, down_n=64, k=64, stages=4, swap=True, plan=True)
_MOE_PREFILL = Tiles(gate_up_n=64, down_n=128, warps=8)
# A pass's attention (H100, 2026-12-06, a pass of 7 groups, one layer): 128 queries by 64 keys
# in 4 warps, 327 µs against flash's 414 with its gathers (1.27x, 262 TFLOP/s), 307 against 384
# with a page of past rows each; four stages the same, and 128 x 128 in 8 warps; 128 x 64 in 8
# warps and 128 x 32 in 4 no faster than flash.
_PREFILL_ATTENTION = PrefillTile(128, 64, 4, 3)

CARDS = {
    # Decode attention, the fastest of attention_bench's grid over ~2,300 rows as a step's 12
    # layers take it (2026-12-05): 16-row tiles, 121 / 726 / 4,706 µs at 1 / 16 / 128.
    "NVIDIA H200": CardTuning(
        attention=(
            AttentionPlan(16, Tile(16, 1, mma=True), 2048),
            AttentionPlan(ANY, Tile(16, 1, mma=True), 4096),
        ),
        moe_few_tokens=_MOE_FEW_TOKENS,
        moe_many_tokens=_MOE_MANY_TOKENS,
        moe_prefill=_MOE_PREFILL,
        prefill_attention=_PREFILL_ATTENTION,
    ),
    # Decode attention (2026-12-06): 32-row tiles from 2 sequences on, 842 µs at 16 and 6,045
    # at 128 against 16-row tiles' 886 and 6,177; at one sequence, whose slices are 16 rows,
    # 16-row tiles (129 µs against 138).
    "NVIDIA H100 80GB HBM3": CardTuning(
        attention=(
            AttentionPlan(1, Tile(16, 1, mma=True), 2048),
            AttentionPlan(16, Tile(32, 1, mma=True), 2048),
            AttentionPlan(ANY, Tile(32, 1, mma=True), 4096),
        ),
        moe_few_tokens=_MOE_FEW_TOKENS,
        moe_many_tokens=_MOE_MANY_TOKENS,
        moe_prefill=_MOE_PREFILL,
        prefill_attention=_PREFILL_ATTENTION,
    ),
}
DEFAULT_CARD = "NVIDIA H200"


def tuning_for(card: str) -> CardTuning:
    """The table measured on ``card`` (card_name), or the H200's for a card not listed."""
    return CARDS.get(card, CARDS[DEFAULT_CARD])


def retune(card: str, **changes: Any) -> None:
    """A bench's trial of other choices on ``card`` (CardTuning's fields), set before the
    engine captures its step graphs: the kernels read the table at each launch."""
    CARDS[card] = dataclasses.replace(tuning_for(card), **changes)


def card_name(device: torch.device) -> str:
    """The card's name as torch gives it ("cpu" off the GPU), looked up once a card."""
    if device.type != "cuda":
        return "cpu"
    return _card_name(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _card_name(index: int) -> str:
    return torch.cuda.get_device_name(index)
