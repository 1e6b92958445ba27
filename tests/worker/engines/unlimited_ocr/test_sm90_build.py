"""The MoE kernels built for the H200 (sm_90) here, on the CPU, with Triton's own compiler.

On the card, a launch whose program asks for more shared memory than a block may have fails
(OutOfResources): the tenth GPU run's mlp_bench stopped so, and the five-launch MoE ran its
gate/up slower than the two launches it replaced, because a program compiled for both MLPs'
branches held both tile sets' shared memory. Neither shows in Triton's interpreter, which runs
no compiler. Here each launch the engine makes at v1's widths is compiled as the card compiles
it and its shared memory read back: every one must fit the H200, and none, the launch that runs
both MLPs included, may need more than the pipeline buffers of one MLP's tiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ocr_worker.engines.unlimited_ocr.kernels.tuning import PREFILL_TILES, TILES
from tests.worker.engines.unlimited_ocr.sm90_build import H200_SHARED_PER_BLOCK, LAYOUTS

# A decode step of 1 and of 16 sequences (narrow tiles), of 128 (wide), and an 8-page group's
# prefill (2,185 rows: a pair table of 16,384).
TOKENS = ["1", "16", "128", "2185"]


@pytest.fixture(scope="module")
def built() -> dict:  # type: ignore[type-arg]
    # A process of its own: this one runs Triton's interpreter (conftest), which compiles none.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.worker.engines.unlimited_ocr.sm90_build", *TOKENS],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("tokens", TOKENS)
def test_every_moe_launch_fits_the_h200_and_holds_one_mlps_buffers_only(
    built: dict,  # type: ignore[type-arg]
    tokens: str,
) -> None:
    used = built[tokens]
    for name, sizes in used.items():
        for kernel in ("gate_up", "down"):
            size, one_mlp = sizes[kernel], sizes[f"{kernel}_one_mlp"]
            assert 0 < size <= H200_SHARED_PER_BLOCK, (name, kernel, size)
            # No more than one MLP's pipeline (a quarter's slack for Triton's own scratch):
            # the if/else of the first five-launch kernel held both MLPs' buffers, 2x.
            assert size <= 1.25 * one_mlp, (name, kernel, size, one_mlp)


@pytest.mark.parametrize("tokens", [t for t in TOKENS if int(t) <= 256])  # the steps
def test_a_steps_expert_tiles_run_on_the_warpgroup_mma_where_their_m_side_is_64_or_more(
    built: dict,  # type: ignore[type-arg]
    tokens: str,
) -> None:
    """Tiles.swap reaches the compiled kernels: a step's ≤ 32 pairs as the MMA's M side are
    too few for Hopper's warpgroup MMA (M ≥ 64), the weights' 64 rows of a transposed tile
    are not (32-wide tiles stay on mma.sync). Both orientations of each count's tiles are
    built, the default one and the other; at 128 tokens the default (64-wide tiles,
    transposed: tuning's moe_many_tokens) is on wgmma."""
    launches = [built[tokens]["routed and shared"]]
    launches += [v for k, v in built.items() if k.startswith(f"{tokens} swap=")]
    assert len(launches) == 2
    for launch in launches:
        for kernel in ("gate_up", "down"):
            assert launch[f"{kernel}_wgmma"] is (launch[f"{kernel}_mma_m"] >= 64), launch
    if tokens == "128":  # a step of many sequences: its default tiles on the warpgroup MMA,
        for layout in LAYOUTS:  # merged, or split as merge_for splits a step of 128 tokens
            launch = built[tokens][layout]
            assert launch["gate_up_wgmma"] and launch["down_wgmma"], (layout, launch)


def test_the_decode_steps_other_kernels_build_for_the_h200_and_fit_it(built: dict) -> None:  # type: ignore[type-arg]
    """Attention in every tile the bench may choose from, RoPE, norms, routing, the experts'
    sum, the step's inputs, the token choice, and a prefill's own MoE kernels: each compiles
    for sm_90 (the interpreter accepts code the compiler refuses) and fits."""
    step = built["step"]
    # every tile at 1 and 128 sequences; the merge at both; RoPE, 2 norms, routing in one kernel
    # (16 tokens a program, a prefill's 64) or in 2 logits launches and top-k, 2 sums, the
    # step's inputs, the token choice's 2 kernels;
    # the pair plan of a step (one chunk, no slots) and a prefill (chunks counted first, with
    # slots) and its counts, SiLU·up and the gathered sum of a prefill's MoE; a prefill's
    # attention in every tile
    assert len(step) == 2 * len(TILES) + 20 + len(PREFILL_TILES), sorted(step)
    for kernel, size in step.items():
        assert 0 <= size <= H200_SHARED_PER_BLOCK, (kernel, size)


def test_a_prefills_attention_multiplies_on_the_warpgroup_mma(built: dict) -> None:  # type: ignore[type-arg]
    """A pass's attention is compute-bound (~85 GFLOP a layer for a pass of 7 groups): each
    of its tiles, 64 queries or more a program, must reach Hopper's warpgroup MMA, whose
    rate the older mma.sync has only half of."""
    attention = {k: v for k, v in built["step"].items() if k.startswith("prefill attention")}
    assert len(attention) == len(PREFILL_TILES)
    assert all(name.endswith(" wgmma") for name in attention), sorted(attention)
