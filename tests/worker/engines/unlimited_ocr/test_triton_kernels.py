"""Our Triton decode kernels against the torch ops they replace, on the CPU through Triton's
interpreter (the same kernel code the GPU compiles; CI has no GPU), and the decoding loop
with them against the full-recompute reference, token for token."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
import torch
import torch.nn.functional as F

# On a GPU box test_gpu.py runs these kernels compiled; here they run interpreted, on the CPU.
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="compiled in test_gpu.py")
if not torch.cuda.is_available():  # tests/conftest.py sets it too, before triton's first import
    os.environ["TRITON_INTERPRET"] = "1"

from ocr_worker.engines.unlimited_ocr.kernels import choice as choice_kernels  # noqa: E402
from ocr_worker.engines.unlimited_ocr.kernels import decode_attention as kernels  # noqa: E402
from ocr_worker.engines.unlimited_ocr.kernels import norms, routing, tuning  # noqa: E402
from ocr_worker.engines.unlimited_ocr.kernels.choice import choose_on_device  # noqa: E402
from ocr_worker.engines.unlimited_ocr.model.checkpoint import load_model  # noqa: E402
from ocr_worker.engines.unlimited_ocr.step.batch_rows import BatchRows  # noqa: E402
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner  # noqa: E402
from ocr_worker.engines.unlimited_ocr.step.sampling import choose  # noqa: E402
from ocr_worker.engines.unlimited_ocr.step.step_inputs import (  # noqa: E402
    rotary_table,
    step_inputs,
)
from tests.numerics import FP32_EPS, assert_same_sums  # noqa: E402
from tests.worker.engines.unlimited_ocr import reference  # noqa: E402
from tests.worker.engines.unlimited_ocr.test_model_runner import (  # noqa: E402
    _reference,
    _request,
    _scheduler,
)
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint  # noqa: E402

HEADS, DIM = 10, 32  # v1 has 10 heads (of 128): not a power of two


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    return load_model(path, device=torch.device("cpu"), dtype=torch.float32)


def _pool(rows: int, seed: int) -> torch.Tensor:
    return torch.randn(rows, HEADS, DIM, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("one_slice", [False, True])  # rows split over programs, or not
@pytest.mark.parametrize(
    "tile",  # either form; a tile of 32 rows runs past the default's 16-row slices, masked
    [tuning.Tile(32, 4), tuning.Tile(16, 1, mma=True), tuning.Tile(32, 4, mma=True)],
    ids=str,
)
def test_paged_attention_equals_sdpa_over_the_gathered_rows(
    one_slice: bool, tile: tuning.Tile
) -> None:
    programs = 1 if one_slice else None
    batch = 4
    g = torch.Generator().manual_seed(batch)
    k_pool, v_pool = _pool(1000, 1), _pool(1000, 2)
    width = 150  # the last slice and tile ragged
    rows = torch.stack([torch.randperm(1000, generator=g)[:width] for _ in range(batch)])
    lengths = torch.randint(1, width + 1, (batch,), generator=g)
    lengths[0] = 1  # a sequence that sees only its first row
    valid = torch.arange(width)[None] < lengths[:, None]
    valid[-1] = torch.rand(width, generator=g) < 0.5  # holes, as the ring's unused slots
    valid[-1, 0] = True
    q = torch.randn(batch, HEADS, DIM, generator=g)

    ours = kernels.paged_decode_attention(q, k_pool, v_pool, rows, valid, tile, programs)

    expected = F.scaled_dot_product_attention(
        q[:, :, None],
        k_pool[rows].transpose(1, 2),
        v_pool[rows].transpose(1, 2),
        attn_mask=valid[:, None, None],
    )[:, :, 0]
    # numpy's and SDPA's orders: a score sums DIM products, an output `width` weighted rows
    assert_same_sums(ours, expected, length=DIM + width)
    # Rows outside a sequence's valid set change nothing: poison them and look again.
    poisoned_k, poisoned_v = k_pool.clone(), v_pool.clone()
    hidden = rows[~valid]
    poisoned_k[hidden], poisoned_v[hidden] = 1e4, -1e4
    shown = rows[valid]
    poisoned_k[shown], poisoned_v[shown] = k_pool[shown], v_pool[shown]
    again = kernels.paged_decode_attention(q, poisoned_k, poisoned_v, rows, valid, tile, programs)
    assert_same_sums(again, expected, length=DIM + width)


@pytest.mark.parametrize("card", [*tuning.CARDS, "NVIDIA A100-SXM4-80GB", "cpu"])
def test_every_step_size_on_every_card_gets_a_tile_the_gpu_tests_check(card: str) -> None:
    """A step of any size finds a plan, and its tile is one of TILES: the tiles test_gpu.py
    checks against SDPA on the card and the sm_90 build compiles. A card with no plans of its
    own (or the CPU) takes the H200's."""
    for batch in (1, 2, 16, 17, 128, 256, 4096):
        plan = kernels.attention_plan(batch, card)
        assert plan.tile in tuning.TILES, (card, batch, plan)
        assert batch <= plan.up_to
        if card not in tuning.CARDS:
            assert plan == kernels.attention_plan(batch, tuning.DEFAULT_CARD)


def test_the_h200_and_unlisted_cards_keep_the_tile_and_programs_measured_on_the_h200() -> None:
    """The choice measured on the H200 (bench/RESULTS.md, "GPU engine: kernels"): 16-row tiles
    on the tensor cores, one warp, 2,048 programs up to 16 sequences and 4,096 above."""
    for card in ("NVIDIA H200", "NVIDIA A100-SXM4-80GB"):
        for batch, programs in ((1, 2048), (16, 2048), (17, 4096), (128, 4096)):
            plan = kernels.attention_plan(batch, card)
            assert (plan.tile, plan.programs) == (tuning.Tile(16, 1, mma=True), programs)


@pytest.mark.parametrize("card", [*tuning.CARDS, "cpu"])
def test_every_cards_prefill_tile_is_one_the_gpu_tests_check(card: str) -> None:
    """The prefill attention's tile of every card's table is one of PREFILL_TILES (what
    test_gpu.py checks against SDPA and the sm_90 build compiles), and the experts' tiles of a
    step of many sequences are transposed over the pair plan, as the sm_90 build expects."""
    table = tuning.tuning_for(card)
    assert table.prefill_attention in tuning.PREFILL_TILES
    assert table.moe_many_tokens.swap and table.moe_many_tokens.plan


@pytest.mark.parametrize("heads_block", [None, 1, 4])  # a row's 10 heads in 1, 10 or 3 programs
def test_rope_store_rotates_q_and_writes_k_and_v_to_their_ring_rows(
    heads_block: int | None,
) -> None:
    g = torch.Generator().manual_seed(0)
    count = 5
    qkv = torch.randn(count, 3 * HEADS * DIM, generator=g)
    runner_rotate, rotary = ModelRunner.rotate, _rotary(DIM)
    positions = torch.tensor([0, 7, 4000, 31999, 12])
    cos, sin = rotary(positions)
    k_pool, v_pool = torch.zeros(40, HEADS, DIM), torch.zeros(40, HEADS, DIM)
    write_rows = torch.tensor([3, 17, 0, 39, 22])

    q = norms.rope_store(qkv, cos, sin, k_pool, v_pool, write_rows, heads_block)

    parts = qkv.view(count, 3, HEADS, DIM)
    torch.testing.assert_close(q, runner_rotate(parts[:, 0], cos, sin))
    torch.testing.assert_close(k_pool[write_rows], runner_rotate(parts[:, 1], cos, sin))
    torch.testing.assert_close(v_pool[write_rows], parts[:, 2])
    untouched = torch.ones(40, dtype=torch.bool)
    untouched[write_rows] = False
    assert not k_pool[untouched].any() and not v_pool[untouched].any()


def test_step_inputs_give_each_sequence_its_ring_slot_rows_and_rotary() -> None:
    """Three sequences as a step reads them: prefixes of 1,500, 40 and 0 rows (two programs a
    row past 1,024 columns) and a ring of 8 slots that has wrapped, is filling, or is a graph's
    padding slot (one generated, nothing but column 0 valid)."""
    window, width = 8, 1508
    prefix_rows = [1500, 40, 0]
    generated = torch.tensor([19, 3, 1])
    positions = torch.tensor([31999, 77, 0])
    ring_rows = torch.arange(3 * window).view(3, window) + 5000
    rows = torch.zeros(3, width, dtype=torch.long)
    prefix_valid = torch.zeros(3, width, dtype=torch.bool)
    ring_column = torch.full((3, width), -1)
    for b, n in enumerate(prefix_rows[:2]):
        prefix_valid[b, :n] = True
        ring_column[b, n : n + window] = torch.arange(window)
    prefix_valid[2, 0] = True  # padding, as cuda_graphs lays it out
    batch = BatchRows(rows, prefix_valid, ring_column, ring_rows, window, scored=False)
    table = rotary_table(_rotary(DIM), 32768, torch.device("cpu"))

    write_rows, valid, cos, sin = step_inputs(positions, generated, batch, table)

    # The slot of the n-th token is (n - 1) % window: 18 % 8, 2, 0.
    assert write_rows.tolist() == [5000 + 2, 5008 + 2, 5016 + 0]
    assert valid[0].sum() == 1500 + window and valid[0, :1508].all()  # the ring is full
    assert valid[1, :43].all() and not valid[1, 43:].any()  # 40 prefix rows, 3 slots written
    assert valid[2, 0] and valid[2].sum() == 1
    expected_cos, expected_sin = _rotary(DIM)(positions)
    # a table of 32,768 rows and three rows take torch's vector loop and its scalar tail in
    # different places: each rounds cos and sin its own way, within an ulp or two
    torch.testing.assert_close(cos, expected_cos, rtol=0, atol=2 * FP32_EPS)
    torch.testing.assert_close(sin, expected_sin, rtol=0, atol=2 * FP32_EPS)


def test_add_rms_norm_equals_the_models_rmsnorm_after_the_residual_add() -> None:
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextRMSNorm

    g = torch.Generator().manual_seed(0)
    norm = UnlimitedOcrTextRMSNorm(1280, eps=1e-6)
    norm.weight.data = torch.rand(1280, generator=g) + 0.5
    x, delta = torch.randn(4, 1280, generator=g) * 3, torch.randn(4, 1280, generator=g)

    summed, normed = norms.add_rms_norm(x, delta, norm.weight, norm.variance_epsilon)
    torch.testing.assert_close(summed, x + delta)
    # the mean of 1,280 squares, summed in numpy's order and in torch's
    assert_same_sums(normed, norm(x + delta).detach(), length=1280)
    same, alone = norms.add_rms_norm(x, None, norm.weight, norm.variance_epsilon)
    assert same is x or torch.equal(same, x)
    assert_same_sums(alone, norm(x).detach(), length=1280)


def _text_config(**overrides):  # type: ignore[no-untyped-def]
    from transformers.models.unlimited_ocr.configuration_unlimited_ocr import (
        UnlimitedOcrTextConfig,
    )

    # v1's MoE in proportion (top-6, two shared experts merged, hidden/expert = 1280/896),
    # small enough for the interpreter.
    base = dict(
        hidden_size=160,
        moe_intermediate_size=112,
        intermediate_size=320,
        n_routed_experts=12,
        num_experts_per_tok=6,
        n_shared_experts=2,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
    )
    return UnlimitedOcrTextConfig(**{**base, **overrides})


def _moe_sums(config: Any) -> int:
    """The terms a MoE output sums through, for its rounding: the gate/up projections' hidden
    size, the down projection's intermediate size (the shared experts' is the widest), and the
    chosen experts' outputs."""
    widest = config.moe_intermediate_size * max(1, config.n_shared_experts)
    return config.hidden_size + widest + config.num_experts_per_tok


def _live(module: Any, seed: int) -> Any:
    g = torch.Generator().manual_seed(seed)
    for parameter in module.parameters():
        parameter.data = torch.randn(parameter.shape, generator=g) * 0.05
    return module.eval()


@pytest.mark.parametrize("tokens", [1, 80])  # one sequence; enough that experts get 2+ blocks
def test_the_moe_kernels_equal_the_models_moe_layer(tokens: int) -> None:
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import _MoeMlp, fused_mlp

    moe = _live(UnlimitedOcrTextMoe(_text_config()), seed=tokens)
    moe.experts.config._experts_implementation = "eager"  # a module alone has none set
    ours = fused_mlp(moe)
    assert isinstance(ours, _MoeMlp)
    h = torch.randn(tokens, 160, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        expected = moe(h[None])[0]
        got = ours(h)
        # the interpreter's products sum in numpy's order, the model's in torch's
        assert_same_sums(got, expected, length=_moe_sums(moe.config))
        ids, _ = routing.route(h, moe.gate.weight, 6, 1.0)
        chosen = moe.gate(h)[2]
        assert torch.equal(ids.sort(dim=1).values.long(), chosen.sort(dim=1).values)
        if tokens > 1:  # a token's output does not depend on which tokens share its step
            # alone, its row sits elsewhere in the tiles, which BLAS may round otherwise
            assert_same_sums(ours(h[3:4])[0], got[3], length=_moe_sums(moe.config))
            experts_used = ids.unique().numel()
            pairs_on_busiest = ids.flatten().bincount().max().item()
            rows = kernels_moe().rows_per_program(tokens)
            assert experts_used == 12 and pairs_on_busiest > rows  # several blocks per expert


def test_a_steps_moe_over_the_pair_plan_equals_its_scan(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Tiles.plan: a step of many sequences reads pair_plan's table (by default) instead of
    each program scanning the top-k table. Every pair keeps its own row of the tile, so the
    layer's output is the same to the rounding of a sum, experts over several blocks of rows
    included (a pair in another's row would be off by the values themselves)."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp

    moe = _live(UnlimitedOcrTextMoe(_text_config()), seed=11)
    moe.experts.config._experts_implementation = "eager"
    ours: Any = fused_mlp(moe)
    h = torch.randn(80, 160, generator=torch.Generator().manual_seed(12))
    tiles = kernels_moe().tiles_for(80)
    assert tiles.plan  # the table by default at this count
    plans = []  # the pair tables built
    planned_table = kernels_moe()._planned

    def counted(ids: torch.Tensor, experts: int, slots: torch.Tensor | None) -> torch.Tensor:
        plans.append(ids)
        return planned_table(ids, experts, slots)  # type: ignore[no-any-return]

    monkeypatch.setattr(kernels_moe(), "_planned", counted)
    with torch.no_grad():
        ids, _ = routing.route(h, moe.gate.weight, 6, 1.0)
        assert ids.flatten().bincount().max().item() > kernels_moe().rows_per_program(80)
        ours.tiles = dataclasses.replace(tiles, plan=False)
        scanned = ours(h)
        assert not plans
        ours.tiles = None  # the default
        planned = ours(h)
        assert len(plans) == 1  # the table the kernels read
        assert_same_sums(planned, moe(h[None])[0], length=_moe_sums(moe.config))
    # a pair may sit in another row of its tile in the two, which BLAS may round otherwise
    assert_same_sums(planned, scanned, length=_moe_sums(moe.config))


# v1's proportions give 16-wide gate/up tiles here; the wide sizes, 64-wide tiles in both
# kernels, as v1's steps of many sequences take them (tuning's moe_many_tokens)
WIDE_MOE = {"hidden_size": 320, "moe_intermediate_size": 128}


@pytest.mark.parametrize("sizes", [{}, WIDE_MOE], ids=["v1_proportions", "64_wide_tiles"])
@pytest.mark.parametrize("tokens", [1, 80])
def test_the_moe_kernels_tiles_transposed_give_the_models_values(tokens: int, sizes: dict) -> None:  # type: ignore[type-arg]
    """Tiles.swap: each tile computed as weights · rowsᵀ (the MMA's M side the weights' rows,
    as Hopper's warpgroup MMA wants), stored back transposed. Every pair still lands in its own
    row, experts over several blocks of rows included: the model's values, and the
    untransposed kernels' (to the rounding of a sum: the interpreter's products sum in an order
    numpy and the processor's BLAS choose, which differs between the two layouts)."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp

    config = _text_config(**sizes)
    moe = _live(UnlimitedOcrTextMoe(config), seed=20 + tokens)
    moe.experts.config._experts_implementation = "eager"
    ours: Any = fused_mlp(moe)
    h = torch.randn(tokens, config.hidden_size, generator=torch.Generator().manual_seed(21))
    tiles = kernels_moe().tiles_for(tokens)  # transposed by default at 80, not at 1
    with torch.no_grad():
        ours.tiles = dataclasses.replace(tiles, swap=False)
        untransposed = ours(h)
        ours.tiles = dataclasses.replace(tiles, swap=True)
        transposed = ours(h)
        assert_same_sums(transposed, moe(h[None])[0], length=_moe_sums(config))
    assert_same_sums(transposed, untransposed, length=_moe_sums(config))


@pytest.mark.parametrize(
    "launch",  # in one kernel (16, 32 or 64 tokens a program); in two: a whole row a load,
    [  # more experts a program than exist
        (True, 64, 8),
        (True, 32, 8),
        (True, 64, 8, 3, 32),
        (True, 64, 8, 3, 64),
        (False, 256, 8),
        (False, None, 4),
        (False, None, 1),
        (False, 64, 16),
    ],
    ids=str,
)
@pytest.mark.parametrize("tokens", [9, 40])  # one program, or three, of the fused kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # the card's h; fp32 router
def test_every_routing_launch_chooses_the_models_experts(
    launch: tuple[bool, int | None, int] | tuple[bool, int, int, int, int],
    tokens: int,
    dtype: torch.dtype,
) -> None:
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    moe = _live(UnlimitedOcrTextMoe(_text_config(routed_scaling_factor=2.5)), seed=5)
    h = torch.randn(tokens, 160, generator=torch.Generator().manual_seed(8)).to(dtype)
    router = routing.RouterLaunch(*launch)
    with torch.no_grad():
        ids, weights = routing.route(h, moe.gate.weight, 6, 2.5, router)
        chosen, expected = moe.gate(h)[2], moe.gate(h)[1]
    order, expected_order = ids.long().argsort(dim=1), chosen.argsort(dim=1)
    assert torch.equal(ids.long().gather(1, order), chosen.gather(1, expected_order))
    # a logit sums 160 products and the softmax 12 exponentials, in numpy's order and torch's
    assert_same_sums(
        weights.gather(1, order), expected.float().gather(1, expected_order), length=160 + 12
    )


def test_a_prefills_moe_through_the_sorted_pair_table_equals_the_models(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A prefill's thousands of tokens read pair_plan's table instead of scanning the top-k
    table (here from 40 tokens on, so that the interpreter's run stays short): the same
    layer as the model's, each expert over several 64-row blocks."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp

    moe = _live(UnlimitedOcrTextMoe(_text_config()), seed=9)
    moe.experts.config._experts_implementation = "eager"
    h = torch.randn(150, 160, generator=torch.Generator().manual_seed(10))
    monkeypatch.setattr(kernels_moe(), "SORT_PAIRS_ABOVE", 40)
    ids, _ = routing.route(h, moe.gate.weight, 6, 1.0)
    plan = kernels_moe().pair_plan(ids, 12)
    starts, order = plan[:13], plan[13:]
    assert starts[-1] == 900 and torch.equal(
        ids.flatten()[order.long()].sort().values, ids.flatten().sort().values
    )
    assert (ids.flatten()[order.long()].diff() >= 0).all()  # grouped by expert
    assert (starts.diff() > 64).any()  # an expert over several blocks of rows
    with torch.no_grad():
        assert_same_sums(fused_mlp(moe)(h), moe(h[None])[0], length=_moe_sums(moe.config))


# v1's 64 experts over 2 chunks of 4,096 pairs, or 11 of 512 (as a pass's 23); 12 experts,
# not a power of two, over 9 chunks; 1,536 pairs: 3 whole chunks, the last one full
@pytest.mark.parametrize(
    ("experts", "tokens", "chunk"),
    [(64, 900, 4096), (64, 900, 512), (12, 700, 512), (64, 256, 512)],
)
def test_the_pair_plan_groups_a_prefills_pairs_by_expert_in_pair_order(  # type: ignore[no-untyped-def]
    monkeypatch, experts: int, tokens: int, chunk: int
) -> None:
    """pair_plan's counting sort against torch's stable argsort, over more pairs than one
    chunk (a prefill's, 13k a group at v1's top-6: each chunk's counts first), with ids out
    of range (a NaN's token) counted with the nearest real expert and some experts never
    chosen."""
    monkeypatch.setattr(kernels_moe(), "PLAN_CHUNK", chunk)
    g = torch.Generator().manual_seed(21)
    chosen = experts * 5 // 8  # the rest idle
    ids = torch.randint(0, chosen, (tokens, 6), generator=g, dtype=torch.int32)
    ids[7, 2], ids[8, 0] = -3, 99
    plan = kernels_moe().pair_plan(ids, experts)
    assert ids.numel() > kernels_moe().PLAN_CHUNK
    assert torch.equal(plan.long(), reference.pair_plan(ids, experts))
    # and where each pair landed, which the experts' sum reads it from
    same, slots = kernels_moe().pair_plan_and_slots(ids, experts)
    assert torch.equal(same, plan)
    assert torch.equal(plan[experts + 1 :].long()[slots.long()], torch.arange(ids.numel()))


@pytest.mark.parametrize("tokens", [3, 150])  # most experts idle (empty groups); all busy
@pytest.mark.parametrize("implementation", ["eager", "grouped_mm"])
def test_a_prefills_moe_through_torchs_grouped_gemm_equals_the_models(
    tokens: int, implementation: str
) -> None:
    """The prefill's "grouped_mm" MoE (grouped_experts.py: torch's grouped GEMM, our routing
    and sum) against the model's layer in either of its experts implementations, the residual
    add and the next norm included, as the prefill runs it."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
        UnlimitedOcrTextMoe,
        UnlimitedOcrTextRMSNorm,
    )

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp, mlp_add_and_norm

    moe = _live(UnlimitedOcrTextMoe(_text_config(routed_scaling_factor=2.5)), seed=11)
    moe.experts.config._experts_implementation = implementation
    norm = _live(UnlimitedOcrTextRMSNorm(160), seed=12)
    g = torch.Generator().manual_seed(13)
    h, x = torch.randn(tokens, 160, generator=g), torch.randn(tokens, 160, generator=g)
    ours = fused_mlp(moe)
    with torch.no_grad():
        summed, normed = mlp_add_and_norm(ours, x, h, norm, grouped_mm=True)
        expected = x + moe(h[None])[0]
        # torch's grouped GEMM and the model's loop over experts sum in their own orders
        terms = _moe_sums(moe.config)
        assert_same_sums(summed, expected, length=terms)
        assert_same_sums(normed, norm(expected), length=terms + 160)  # and the norm's mean
        if tokens > 3:  # a token's output does not depend on the tokens beside it
            alone = mlp_add_and_norm(ours, x[5:6], h[5:6], norm, grouped_mm=True)
            assert_same_sums(alone[0][0], summed[5], length=terms)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the interpreter's NaN math
@pytest.mark.parametrize("fused", [True, False])
def test_a_token_whose_hidden_state_overflowed_is_routed_to_real_experts(fused: bool) -> None:
    """A NaN in a token's h makes every logit NaN: its experts are still real ones (an id
    past the last would fault the sorted pair table's count on the card), and the other
    tokens keep their own."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    moe = _live(UnlimitedOcrTextMoe(_text_config()), seed=11)
    h = torch.randn(20, 160, generator=torch.Generator().manual_seed(12))
    h[3, 7] = float("nan")
    ids, _ = routing.route(h, moe.gate.weight, 6, 1.0, routing.RouterLaunch(fused=fused))
    assert ((ids >= 0) & (ids < 12)).all()
    with torch.no_grad():
        chosen = moe.gate(h)[2]
    fine = torch.ones(20, dtype=torch.bool)
    fine[3] = False
    assert torch.equal(ids[fine].sort(dim=1).values.long(), chosen[fine].sort(dim=1).values)
    plan = kernels_moe().pair_plan(ids, 12)
    assert plan[12] == 120  # every pair counted, none lost


@pytest.mark.parametrize("tokens", [1, 80])
def test_shared_experts_beside_the_routed_and_the_norm_fused_change_no_value(tokens: int) -> None:
    """The step's MoE in five launches (shared experts in the routed experts' launches; the
    sum, residual add and next RMSNorm in one kernel) or six (the gate/up apart) gives what the
    eight launches give, to the rounding of a sum, and what the model's own layer and norm
    give."""
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
        UnlimitedOcrTextMoe,
        UnlimitedOcrTextRMSNorm,
    )

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp, mlp_add_and_norm

    moe = _live(UnlimitedOcrTextMoe(_text_config()), seed=tokens + 1)
    moe.experts.config._experts_implementation = "eager"
    norm = _live(UnlimitedOcrTextRMSNorm(160), seed=5)
    gen = torch.Generator().manual_seed(9)
    h, x = torch.randn(tokens, 160, generator=gen), torch.randn(tokens, 160, generator=gen)
    ours = fused_mlp(moe)
    assert type(ours).__name__ == "_MoeMlp"  # the kernels, not the module they fall back to
    with torch.no_grad():
        summed = x + moe(h[None])[0]
        expected = (moe(h[None])[0], summed, norm(summed))
        ways = {}
        for merge in ("all", "down", "none"):
            ours.merge = merge  # type: ignore[attr-defined]
            ways[merge] = (ours(h), *mlp_add_and_norm(ours, x, h, norm))
    # launches merged or not sum the experts' outputs in their own orders; the norm adds a mean
    terms = _moe_sums(moe.config) + 160
    for outputs in ways.values():
        for got, same, want in zip(outputs, ways["none"], expected, strict=True):
            assert_same_sums(got, same, length=terms)
            assert_same_sums(got, want, length=terms)


def test_the_dense_mlp_kernels_equal_the_models_first_layer_mlp() -> None:
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMLP

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import _DenseMlp, fused_mlp

    mlp = _live(UnlimitedOcrTextMLP(_text_config()), seed=3)
    assert fused_mlp(mlp) is mlp  # by default the dense MLP stays with the module (cuBLAS)
    ours = fused_mlp(mlp, dense=True)
    assert isinstance(ours, _DenseMlp)
    h = torch.randn(20, 160, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        # a value sums the hidden size's products, then the intermediate size's
        assert_same_sums(ours(h), mlp(h), length=160 + 320)


def test_an_mlp_the_kernels_do_not_cover_stays_the_module() -> None:
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrTextMoe

    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import fused_mlp

    grouped = UnlimitedOcrTextMoe(_text_config(topk_method="group_limited_greedy", n_group=2))
    assert fused_mlp(grouped) is grouped


def kernels_moe():  # type: ignore[no-untyped-def]
    from ocr_worker.engines.unlimited_ocr.kernels import moe as moe_kernels

    return moe_kernels


def test_the_token_choice_in_kernels_equals_torchs_argmax_with_the_guards_bans() -> None:
    """v1's 129,280 ids (slices of choice_kernels.SLICE): ties go to the lowest id wherever the
    equal logits fall (one slice, across a slice edge, the last id); a ban on the largest makes
    the next largest win; a forced id replaces the choice but not the model's own."""
    g = torch.Generator().manual_seed(3)
    edge = choice_kernels.SLICE
    logits = torch.randn(7, 129280, generator=g)
    logits[1, [5, 900]] = 50.0  # a tie inside one slice
    logits[2, [edge - 1, edge, 129279]] = 50.0  # across a slice edge and at the very end
    logits[3, [7, 2000]] = torch.tensor([60.0, 59.0])
    logits[5] = 1.0  # all equal
    logits[6, -1] = 70.0
    banned = [set(), {5}, {edge - 1, edge}, {7}, {1}, {0, 1}, set()]
    forced = [None, None, None, None, 42, None, None]
    wanted, chosen = choose(logits, banned, forced, kernels=True).read()
    assert wanted == logits.argmax(-1).tolist()
    assert wanted[1:3] == [5, edge - 1] and wanted[5] == 0
    assert chosen == [wanted[0], 900, 129279, 2000, 42, 2, 129279]
    torch_wanted, torch_chosen = choose(logits, banned, forced).read()
    assert (torch_wanted, torch_chosen) == (wanted, chosen)


def test_the_token_choice_in_kernels_takes_a_nan_as_argmax_does() -> None:
    """A model whose logits overflowed: an all-NaN row gives id 0 and a row with NaNs the
    first NaN, as torch's argmax, never an id past the vocabulary (the next step's embedding
    lookup would fail on the card and take the worker down)."""
    logits = torch.randn(3, 129280, generator=torch.Generator().manual_seed(5))
    logits[0] = float("nan")
    logits[1, [70000, 129279]] = float("nan")
    logits[2, 5] = 80.0
    banned = [{0}, {70000}, set()]
    wanted, chosen = choose(logits, banned, [None] * 3, kernels=True).read()
    assert wanted == logits.argmax(-1).tolist() == [0, 70000, 5]
    assert chosen == choose(logits, banned, [None] * 3).read()[1] == [1, 129279, 5]


def test_the_token_choice_in_kernels_reads_the_models_own_dtype_and_odd_vocabularies() -> None:
    """bf16 logits as the step leaves them, a vocabulary not a multiple of a slice, no bans."""
    logits = torch.randn(3, 1500, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    logits[1, [1100, 1499]] = 9.0
    wanted, chosen = choose(logits, [set()] * 3, [None] * 3, kernels=True).read()
    assert wanted == chosen == logits.float().argmax(-1).tolist()
    assert wanted[1] == 1100


@pytest.mark.parametrize("prefill_moe", ["module", "grouped_mm", "kernels"])
def test_decoding_with_the_kernels_matches_the_reference_token_for_token(  # type: ignore[no-untyped-def]
    model, monkeypatch, prefill_moe: str
) -> None:
    """A ragged batch through the fused step: ring wraps, sequences join and leave. The
    prefill's MoE in transformers' module, by torch's grouped GEMM, or in our kernels; the
    last here over pair_plan's table at any token count, the decode steps' included (as a
    batch of 257+ would)."""
    scheduler = _scheduler(model, fused=True)
    runner = scheduler.runner
    fused = runner.fused
    assert fused is not None
    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import _MoeMlp

    assert fused.mlps[0] is model.model.language_model.layers[0].mlp  # cuBLAS's, dense
    assert all(isinstance(mlp, _MoeMlp) for mlp in fused.mlps[1:])  # the MoEs through ours
    fused.prefill_moe = prefill_moe
    sorted_steps = prefill_moe == "kernels"
    monkeypatch.setattr(kernels_moe(), "SORT_PAIRS_ABOVE", 0 if sorted_steps else 10**6)
    plans = []  # the sorted pair tables built (the grouped_mm prefill's with their slots)
    planned = kernels_moe()._planned

    def counted_plan(ids: torch.Tensor, experts: int, slots: torch.Tensor | None) -> torch.Tensor:
        plans.append(ids)
        return planned(ids, experts, slots)  # type: ignore[no-any-return]

    monkeypatch.setattr(kernels_moe(), "_planned", counted_plan)

    calls = {"step": 0, "prefill": 0}
    real = fused  # narrowed: not None

    class Counted:  # the same kernels, counted
        def __call__(self, *args):  # type: ignore[no-untyped-def]
            calls["step"] += 1
            return real(*args)

        def prefill(self, *args):  # type: ignore[no-untyped-def]
            calls["prefill"] += 1
            return real.prefill(*args)

    runner.fused = Counted()  # type: ignore[assignment]
    choices = []  # and every token chosen in choice_kernels, the guard's bans applied there

    def counted_choice(logits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        choices.append(table)
        return choose_on_device(logits, table)

    monkeypatch.setattr(choice_kernels, "choose_on_device", counted_choice)
    specs = {"a": ([1], [5], 20), "b": ([2, 3], [5, 6, 7, 8], 14), "c": ([4, 5, 6], [9], 25)}
    for name, spec in specs.items():
        scheduler.submit(_request(model, name, *spec))
    ours = {f.sequence.seq_id: f.sequence.generated for f in scheduler.run()}
    assert calls["step"] >= 24  # every decode step went through the kernels
    assert calls["prefill"] == 1  # and the three prefills, waiting together, in one pass
    # the tiny model's two MoE layers, in the prefill and every step
    plans_wanted = {"module": 0, "grouped_mm": 2, "kernels": 2 * (1 + calls["step"])}
    assert len(plans) == plans_wanted[prefill_moe]
    # a choice after each step, and one for the pass's three first tokens
    assert len(choices) == calls["step"] + 1 and choices[0].shape[0] == 3
    assert all((table[:, 1:] == 1).any(dim=1).all() for table in choices)  # EOS banned
    for name, (pages, prompt, steps) in specs.items():
        assert ours[name] == _reference(model, pages, prompt, steps), name


def test_a_prefill_pass_gives_each_group_the_logits_of_its_every_row_computation(model) -> None:  # type: ignore[no-untyped-def]
    """The fused prefill runs its last layer past k and v for each group's last row only: a
    pass of a group after its kept boundary page and a fresh group gives the first-token
    logits the reference gets through every row of every layer, each group its own."""
    logits = {}
    for fused in (False, True, "whole last layer"):  # the last: tiles_bench's base
        scheduler = _scheduler(model, fused=bool(fused))
        if fused == "whole last layer":
            scheduler.runner.fused.whole_last_layer = True  # type: ignore[union-attr]
        (first,) = scheduler.run_one(_request(model, "g0", [1, 2], [5, 6], 4, keep=(2,)))
        passes: list[torch.Tensor] = []
        prefill_many = scheduler.runner.prefill_many

        def recorded(items, prefill_many=prefill_many, passes=passes):  # type: ignore[no-untyped-def]
            passes.append(prefill_many(items))
            return passes[-1]

        scheduler.runner.prefill_many = recorded  # type: ignore[method-assign]
        scheduler.submit(_request(model, "g1", [3], [5, 6], 2, reused=first.kept, with_bos=False))
        scheduler.submit(_request(model, "x", [4, 5], [9], 2))
        scheduler.run()
        assert (scheduler.runner.fused is not None) == bool(fused)  # the kernels throughout
        (logits[fused],) = passes  # both groups in one pass
    assert logits[True].shape[0] == 2
    torch.testing.assert_close(logits[True], logits[False], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(logits["whole last layer"], logits[False], rtol=1e-4, atol=1e-4)
    assert (logits[False][0] - logits[False][1]).abs().max() > 0.1  # two groups, two answers


def test_a_token_choice_that_fails_to_launch_falls_back_to_torchs_ops(model, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A card where the choice kernels do not build: the worker logs it once and decodes on,
    with the same tokens, rather than failing every group."""
    tries = []

    def broken(logits: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        tries.append(table)
        raise RuntimeError("triton: no kernel image for this device")

    monkeypatch.setattr(choice_kernels, "choose_on_device", broken)
    scheduler = _scheduler(model, blocks=64, concurrency=4, fused=True)
    scheduler.submit(_request(model, "a", [1], [5], 6))
    ours = {f.sequence.seq_id: f.sequence.generated for f in scheduler.run()}
    assert len(tries) == 1  # tried once, then torch's ops for good
    assert ours["a"] == _reference(model, [1], [5], 6)


def _rotary(dim: int):  # type: ignore[no-untyped-def]
    """ModelRunner.rotary for a head size of ``dim`` (v1's base of 10,000)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def rotary(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.to(torch.float32)[:, None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    return rotary
