"""On the GPU: the CUDA-graphed decode step gives the tokens of the eager step.

The model has the real decoder's widths (1280 hidden, 64 experts of 896, top-6, window 128)
with 2 layers and random bf16 weights: the shapes that production graphs capture. cuBLAS may
pick other bf16 kernels under capture, which can flip a near-tie, after which free-running
outputs diverge; so the graphed run is teacher-forced with the eager tokens and its own
choices compared step by step. A wrong row or a stale buffer agrees on ~0% of 4096 ids."""

from __future__ import annotations

import pytest
import torch

from ocr_worker.engines.unlimited_ocr.kernels import decode_attention as kernels
from ocr_worker.engines.unlimited_ocr.kernels import tuning
from ocr_worker.engines.unlimited_ocr.kernels.prefill_attention import paged_prefill_attention
from ocr_worker.engines.unlimited_ocr.kernels.tuning import PREFILL_TILES, PrefillTile
from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, NewSegment, Scheduler
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import VisualKVWorkspace
from tests.worker.engines.unlimited_ocr import reference
from tests.worker.engines.unlimited_ocr.tiny_model import TINY_VISION

pytestmark = pytest.mark.gpu
DEVICE = torch.device("cuda")


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    from transformers.models.unlimited_ocr import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
    )

    config = UnlimitedOcrConfig(
        vision_config=TINY_VISION, text_config={"num_hidden_layers": 2, "vocab_size": 4096}
    )
    # Built on the device, not on "meta": buffers (RoPE frequencies, CLIP positions) are
    # computed, not left as whatever memory to_empty found.
    with torch.device(DEVICE):
        model = UnlimitedOcrForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and param.dim() == 1:
                param.fill_(1.0)
            else:
                std = 1.0 if "embed_tokens" in name else 0.002 if "mlp.gate." in name else 0.02
                param.normal_(0, std, generator=gen)
    return model.eval()


def _run(
    model, graphs: bool, selector: bool, forced=None, fused=False, overlap=True
) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    workspace = VisualKVWorkspace(num_blocks=512, block_size=32)
    runner = ModelRunner(
        model,
        num_blocks=512,
        block_size=32,
        device=DEVICE,
        dtype=torch.bfloat16,
        cuda_graphs=graphs,
        rule=BlockSelector(SrSwaSettings(max_blocks=12), block_size=32) if selector else R_SWA,
        fused_kernels=fused,
    )
    scheduler = Scheduler(runner, workspace, max_concurrency=3, window=128, overlap=overlap)
    embed = model.model.language_model.embed_tokens
    for n, steps in enumerate((300, 150, 200, 170)):  # ragged, wrapping, one joins mid-way
        gen = torch.Generator(device=DEVICE).manual_seed(n)
        pages = [
            NewSegment(
                "page",
                torch.randn(273, 1280, device=DEVICE, generator=gen, dtype=torch.bfloat16),
                page_no=p,
            )
            for p in range(n + 1)
        ]
        new = [
            NewSegment("bos", embed(torch.tensor([0], device=DEVICE))),
            *pages,
            NewSegment("prompt", embed(torch.tensor([5, 6, 7], device=DEVICE))),
        ]
        guard = PageGuard(
            num_pages=1,
            eos_id=-1,
            marker_ids=(),
            page_budget=10**6,
            token_text=str,
            framed=False,
            ngram_size=0,
        )
        guard._forced = list(forced[f"s{n}"]) if forced else []  # teacher forcing
        scheduler.submit(DecodeRequest(f"s{n}", [], new, guard, steps))
    finished = {f.sequence.seq_id: f.sequence.wanted for f in scheduler.run()}
    assert (runner.graphs is not None and bool(runner.graphs.captured)) == graphs
    assert (runner.fused is not None) == fused  # no silent fallback to the torch ops
    return finished


@pytest.mark.parametrize("graphs", [False, True])
def test_the_triton_kernels_decode_as_the_torch_ops_do(model, graphs: bool) -> None:  # type: ignore[no-untyped-def]
    """Teacher-forced with the torch ops' tokens, our kernels choose the same next token at
    nearly every step: bf16 rounding may differ in the last place and flip a near-tie, nothing
    more. Measured on the H200: 97.6-100% per sequence (4 flips in 170 steps at worst, the
    same in every loan); a wrong row or a stale buffer agrees on ~0%."""
    torch_ops = _run(model, False, False)
    fused = _run(model, graphs, False, forced=torch_ops, fused=True)
    for name, tokens in torch_ops.items():
        agree = sum(a == b for a, b in zip(fused[name], tokens, strict=True)) / len(tokens)
        assert agree >= 0.95, (name, agree)


@pytest.mark.parametrize("selector", [False, True])
def test_graphed_decode_equals_eager(model, selector: bool) -> None:  # type: ignore[no-untyped-def]
    eager = _run(model, False, selector)
    graphed = _run(model, True, selector, forced=eager)
    for name, tokens in eager.items():
        agree = sum(a == b for a, b in zip(graphed[name], tokens, strict=True)) / len(tokens)
        assert agree >= 0.98, (name, agree)


def test_overlapped_steps_decode_as_steps_read_one_by_one(model) -> None:  # type: ignore[no-untyped-def]
    """On the card the overlap is real: each step is launched before the host has read the
    tokens it feeds (pinned copies, events). Teacher-forced with the one-by-one run's tokens,
    the model's choices agree at (nearly) every step; a sequence finishing rides along one
    step in a bigger batch, and a prefill pass packs other parts, whose cuBLAS GEMMs may round
    differently, nothing more. Measured on an H100 (2026-12-05): the same flips on every repeat,
    with flash attention in the prefill 1 in 300 and none in the others, with the Triton
    prefill attention 4 in 170 (s3) and none in the others; a wrong row or a stale token
    agrees on ~0%."""
    one_by_one = _run(model, True, False, fused=True, overlap=False)
    overlapped = _run(model, True, False, forced=one_by_one, fused=True)
    for name, tokens in one_by_one.items():
        agree = sum(a == b for a, b in zip(overlapped[name], tokens, strict=True)) / len(tokens)
        assert agree >= 0.97, (name, agree)


@pytest.mark.parametrize("tokens", [1, 16, 128, 2185])  # 2,185: a prefill, pair_plan's table
def test_the_mlp_kernels_equal_the_models_mlps_in_bf16(model, tokens: int) -> None:  # type: ignore[no-untyped-def]
    """At the real widths, in bf16: the dense first layer and an MoE layer (64 experts, top-6,
    shared experts) through our kernels, against transformers' modules; a wrong expert, row or
    weight would be off by ~100%, bf16 rounding by well under 1%."""
    from ocr_worker.engines.unlimited_ocr.kernels import routing as routing_kernels
    from ocr_worker.engines.unlimited_ocr.step.fused_mlp import (
        MOE_MERGES,
        _DenseMlp,
        _MoeMlp,
        fused_mlp,
        mlp_add_and_norm,
    )

    layers = model.model.language_model.layers
    gen = torch.Generator(device=DEVICE).manual_seed(tokens)
    h = torch.randn(tokens, 1280, device=DEVICE, generator=gen, dtype=torch.bfloat16)
    for mlp, kind in ((layers[0].mlp, _DenseMlp), (layers[1].mlp, _MoeMlp)):
        ours = fused_mlp(mlp, dense=True)
        assert isinstance(ours, kind)
        with torch.no_grad():
            expected = mlp(h[None])[0].float()
            got = ours(h).float()
        error = ((got - expected).norm() / expected.norm()).item()
        assert error < 5e-3, (kind.__name__, error)
        if isinstance(ours, _MoeMlp):  # wherever the shared experts run: the same values
            norm, x = model.model.language_model.norm, torch.randn_like(h)
            with torch.no_grad():
                ours.merge = "none"
                unfused = mlp_add_and_norm(ours, x, h, norm)
                for merge in MOE_MERGES:
                    ours.merge = merge
                    assert torch.equal(ours(h).float(), got), merge
                    fused = mlp_add_and_norm(ours, x, h, norm)
                    assert all(map(torch.equal, fused, unfused)), merge
                # a prefill's MoE by torch's grouped GEMM (cutlass): the module's values
                grouped = mlp_add_and_norm(ours, x, h, norm, grouped_mm=True)[0].float()
            off = (grouped - (x.float() + expected)).norm() / expected.norm()
            assert off.item() < 1e-2, ("grouped_mm", off.item())
    router = layers[1].mlp.gate
    ids, _ = routing_kernels.route(h, router.weight, router.top_k, 1.0)
    with torch.no_grad():
        chosen = router(h)[2]
    same = (ids.sort(dim=1).values.long() == chosen.sort(dim=1).values).all(dim=1)
    assert same.float().mean().item() >= 0.99


@pytest.mark.parametrize("tokens", [128, 15295])  # a step's (one chunk), a 7-group pass's
def test_the_pair_plan_on_the_card_sorts_as_a_stable_argsort(tokens: int) -> None:
    """The experts' pairs grouped by a counting sort on the card: a pass's 92k pairs over 23
    chunks, counted first, as torch's stable argsort groups them, and each pair's slot."""
    from ocr_worker.engines.unlimited_ocr.kernels import moe as moe_kernels

    gen = torch.Generator(device=DEVICE).manual_seed(tokens)
    ids = torch.randint(0, 64, (tokens, 6), device=DEVICE, generator=gen, dtype=torch.int32)
    plan, slots = moe_kernels.pair_plan_and_slots(ids, 64)
    assert torch.equal(plan.long(), reference.pair_plan(ids, 64))
    assert torch.equal(plan[65:].long()[slots.long()], torch.arange(ids.numel(), device=DEVICE))
    assert torch.equal(moe_kernels.pair_plan(ids, 64), plan)


def test_greedy_on_the_card_picks_what_argmax_picks() -> None:
    from ocr_worker.engines.unlimited_ocr.step.sampling import greedy

    gen = torch.Generator(device=DEVICE).manual_seed(0)
    logits = torch.randn(128, 129280, device=DEVICE, generator=gen)
    logits[1, [5, 900]] = 50.0
    logits[2, [1009, 1010, 129279]] = 50.0
    logits[3] = 1.0
    assert torch.equal(greedy(logits), logits.argmax(-1))
    assert greedy(logits)[1:4].tolist() == [5, 1009, 0]


def test_the_token_choice_in_kernels_on_the_card_equals_torchs() -> None:
    """128 rows of v1's vocabulary, compiled: both choices equal torch's ops', bans and ties."""
    from ocr_worker.engines.unlimited_ocr.kernels import choice as choice_kernels
    from ocr_worker.engines.unlimited_ocr.step.sampling import choose

    gen = torch.Generator(device=DEVICE).manual_seed(1)
    logits = torch.randn(128, 129280, device=DEVICE, generator=gen)
    edge = choice_kernels.SLICE
    logits[1, [edge - 1, edge, 129279]] = 50.0
    logits[2] = 1.0
    top = logits.argmax(-1).tolist()
    banned = [{top[b], b} if b % 3 else {1} for b in range(128)]
    forced = [7 if b % 5 == 0 else None for b in range(128)]
    ours = choose(logits, banned, forced, kernels=True).read()
    assert ours == choose(logits, banned, forced).read()
    assert ours[0][1:3] == [edge - 1, 0] and ours[1][1] == edge


def test_the_token_choice_compiles_once_for_any_usual_ban_count() -> None:
    """The ban table's width is a launch argument: one to seven bans a row share one build,
    so a row's new ban count stalls no decode step on a compile."""
    from ocr_worker.engines.unlimited_ocr.kernels.choice import _slice_best
    from ocr_worker.engines.unlimited_ocr.step.sampling import choose

    logits = torch.randn(2, 3000, device=DEVICE, generator=torch.Generator(DEVICE).manual_seed(6))
    builds = []
    for bans in range(1, 8):
        banned = [set(range(bans)), set(range(10, 10 + bans))]
        ours = choose(logits, banned, [None] * 2, kernels=True).read()
        assert ours == choose(logits, banned, [None] * 2).read()
        builds.append(len(_slice_best.device_caches[torch.cuda.current_device()][0]))
    assert len(set(builds)) == 1, builds


@pytest.mark.parametrize("chosen", tuning.TILES, ids=str)
@pytest.mark.parametrize("batch", [1, 128])
def test_paged_attention_in_every_tile_equals_sdpa_in_bf16(chosen: tuning.Tile, batch: int) -> None:
    """Every tile and form bench/engine/attention_bench.py may choose from (CUDA cores, or tensor
    cores with the query padded), compiled, in bf16, at v1's 10 heads of 128 over ~2,300 rows: the
    values of SDPA over the gathered rows. A wrong row or head is off by ~100%."""
    gen = torch.Generator(device=DEVICE).manual_seed(batch)
    k_pool, v_pool = (
        torch.randn(batch * 2400, 10, 128, device=DEVICE, generator=gen, dtype=torch.bfloat16)
        for _ in range(2)
    )
    rows = torch.randperm(batch * 2400, device=DEVICE, generator=gen)[: batch * 2312]
    rows = rows.view(batch, 2312)
    valid = torch.rand(batch, 2312, device=DEVICE, generator=gen) < 0.9
    valid[:, 0] = True
    q = torch.randn(batch, 10, 128, device=DEVICE, generator=gen, dtype=torch.bfloat16)
    got = kernels.paged_decode_attention(q, k_pool, v_pool, rows, valid, chosen).float()
    expected = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None],
        k_pool[rows].transpose(1, 2),
        v_pool[rows].transpose(1, 2),
        attn_mask=valid[:, None, None],
    )[:, :, 0].float()
    error = ((got - expected).norm() / expected.norm()).item()
    assert error < 1e-2, (chosen, error)


def _three_groups_pass():  # type: ignore[no-untyped-def]
    """A pass of three groups, as the scheduler packs them: one with no past (causal over its
    own rows), two with past rows (a boundary page, read in full, then causal); and SDPA's
    values part by part: (q, k_pool, v_pool, packed, expected)."""
    from tests.worker.engines.unlimited_ocr.prefill_passes import packed_pass

    gen = torch.Generator(device=DEVICE).manual_seed(3)
    k_pool, v_pool = (
        torch.randn(9000, 10, 128, device=DEVICE, generator=gen, dtype=torch.bfloat16)
        for _ in range(2)
    )
    pool = torch.randperm(9000, device=DEVICE, generator=gen)
    # (past rows, new rows) of each part
    packed = packed_pass([(0, 1917), (274, 1916), (274, 700)], pool)
    parts = packed.parts
    q = torch.randn(parts[-1].end, 10, 128, device=DEVICE, generator=gen, dtype=torch.bfloat16)
    expected = torch.cat([p.attend(q, k_pool[p.rows], v_pool[p.rows]) for p in parts]).float()
    return q, k_pool, v_pool, packed, expected


def test_a_prefill_pass_attends_in_one_launch_as_part_by_part() -> None:
    """The varlen flash launch gives each part SDPA's values over its own rows, and so does
    its launch for each part's last row alone (a prefill's last layer). A part that saw
    another's rows, or a mask aligned to the wrong corner, is off by ~100% on the rows it
    changes."""
    from ocr_worker.engines.unlimited_ocr.step import prefill_part

    q, k_pool, v_pool, packed, expected = _three_groups_pass()
    parts, lasts = packed.parts, packed.last_rows
    got = packed.attend(q, k_pool, v_pool).float()
    assert prefill_part._varlen, "the varlen kernel failed: the loop ran instead"
    for part in parts:
        mine = slice(part.start, part.end)
        error = ((got[mine] - expected[mine]).norm() / expected[mine].norm()).item()
        assert error < 1e-2, (part.past, error)
    # The last layer's way: each part's last row alone, through the same launch.
    last = packed.attend_last(q[lasts], k_pool, v_pool).float()
    assert prefill_part._varlen_last, "the varlen kernel failed on last rows: the loop ran"
    for index, part in enumerate(parts):
        wanted = expected[part.end - 1]
        error = ((last[index] - wanted).norm() / wanted.norm()).item()
        assert error < 1e-2, (part.past, error)


@pytest.mark.parametrize("tile", PREFILL_TILES, ids=str)
def test_a_prefill_pass_attends_through_the_pool_as_part_by_part(tile: PrefillTile) -> None:
    """The Triton launch (prefill_attention.py) reads each part's rows in place through the
    pass's row table, compiled in every tile the bench may choose: SDPA's values again."""
    q, k_pool, v_pool, packed, expected = _three_groups_pass()
    got = paged_prefill_attention(
        q, k_pool, v_pool, packed.rows, packed.bounds, packed.longest[0], tile
    ).float()
    for part in packed.parts:
        mine = slice(part.start, part.end)
        error = ((got[mine] - expected[mine]).norm() / expected[mine].norm()).item()
        assert error < 1e-2, (part.past, error)
