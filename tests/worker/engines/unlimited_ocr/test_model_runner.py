"""Our decoding loop against a full-recompute reference on tiny weights, token for token."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from ocr_worker.engines.unlimited_ocr.model.checkpoint import load_model, read_config
from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.runtime.decode_loop import DecodeLoop
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import (
    DecodeRequest,
    Finished,
    NewSegment,
    Scheduler,
    free_segments,
)
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sampling import Chosen
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import VisualKVWorkspace
from tests.worker.engines.unlimited_ocr import reference
from tests.worker.engines.unlimited_ocr.tiny_model import WINDOW, write_tiny_checkpoint

BLOCK = 4
PAGE_TOKENS = 7  # a 128x128 page gives 7 image tokens in the tiny config


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    return load_model(path, device=torch.device("cpu"), dtype=torch.float32)


def _page(seed: int) -> torch.Tensor:
    return torch.randn(PAGE_TOKENS, 64, generator=torch.Generator().manual_seed(seed))


def _tokens(model, ids: list[int]) -> torch.Tensor:  # type: ignore[no-untyped-def]
    return model.model.language_model.embed_tokens(torch.tensor(ids)).detach()


def _request(
    model,
    name: str,
    pages: list[int],
    prompt: list[int],
    steps: int,
    *,  # type: ignore[no-untyped-def]
    reused=(),
    keep=(),
    with_bos: bool = True,
) -> DecodeRequest:
    new = [NewSegment("bos", _tokens(model, [0]))] if with_bos else []
    new += [NewSegment("page", _page(p), page_no=p) for p in pages]
    new.append(NewSegment("prompt", _tokens(model, prompt)))
    guard = PageGuard(
        num_pages=1,
        eos_id=1,
        marker_ids=(),
        page_budget=10**6,
        token_text=str,
        framed=False,
        ngram_size=0,
    )
    return DecodeRequest(
        name, list(reused), new, guard, steps, keep_pages=tuple(keep), ignore_eos=True
    )


def _scheduler(model, blocks: int = 256, concurrency: int = 16, selector=None, fused=False):  # type: ignore[no-untyped-def]
    workspace = VisualKVWorkspace(num_blocks=blocks, block_size=BLOCK)
    runner = ModelRunner(
        model,
        num_blocks=blocks,
        block_size=BLOCK,
        device=torch.device("cpu"),
        dtype=torch.float32,
        rule=selector or R_SWA,
        fused_kernels=fused,  # our Triton kernels, here under Triton's interpreter
    )
    return Scheduler(runner, workspace, concurrency, WINDOW)


def _reference(model, pages: list[int], prompt: list[int], steps: int) -> list[int]:  # type: ignore[no-untyped-def]
    prefix = torch.cat([_tokens(model, [0]), *[_page(p) for p in pages], _tokens(model, prompt)])
    return reference.greedy(model, prefix, steps, WINDOW, banned=(1,))


def _outputs(finished) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    return {f.sequence.seq_id: f.sequence.generated for f in finished}


def test_the_loader_reads_an_official_checkpoint(tmp_path: Path) -> None:
    path = write_tiny_checkpoint(tmp_path)
    assert '"unlimited-ocr"' in (path / "config.json").read_text()
    assert read_config(path).text_config.sliding_window == WINDOW
    model = load_model(path, device=torch.device("cpu"), dtype=torch.float32)
    experts = model.model.language_model.layers[1].mlp.experts
    assert tuple(experts.gate_up_proj.shape) == (8, 64, 64)  # fused from per-expert tensors


def test_one_sequence_matches_the_reference_across_window_wrap(model) -> None:  # type: ignore[no-untyped-def]
    steps = 3 * WINDOW + 2  # the ring wraps three times
    ours = _run(model, [_request(model, "a", [1], [5, 6, 7], steps)])
    assert ours["a"] == _reference(model, [1], [5, 6, 7], steps)


def test_a_ragged_batch_matches_each_sequence_alone(model) -> None:  # type: ignore[no-untyped-def]
    specs = {"a": ([1], [5], 20), "b": ([2, 3], [5, 6, 7, 8], 14), "c": ([4, 5, 6], [9], 25)}
    ours = _run(model, [_request(model, k, *v) for k, v in specs.items()])
    for name, (pages, prompt, steps) in specs.items():
        assert ours[name] == _reference(model, pages, prompt, steps), name


def test_groups_waiting_together_are_prefilled_in_one_pass_each_as_alone(model) -> None:  # type: ignore[no-untyped-def]
    """A group that reuses its boundary page (a masked part: it attends to kept rows) and a
    fresh one (causal) in one prefill pass: each decodes what it decodes alone."""

    def passes(scheduler):  # type: ignore[no-untyped-def]
        sizes: list[int] = []
        prefill_many = scheduler.runner.prefill_many

        def counted(items):  # type: ignore[no-untyped-def]
            sizes.append(len(items))
            return prefill_many(items)

        scheduler.runner.prefill_many = counted
        return sizes

    def second_group(scheduler, *beside):  # type: ignore[no-untyped-def]
        (first,) = scheduler.run_one(_request(model, "g0", [1, 2], [5, 6], 10, keep=(2,)))
        sizes = passes(scheduler)
        scheduler.submit(_request(model, "g1", [3], [5, 6], 12, reused=first.kept, with_bos=False))
        for request in beside:
            scheduler.submit(request)
        return _outputs(scheduler.run()), sizes

    alone, sizes = second_group(_scheduler(model))
    assert sizes == [1]
    fresh = _request(model, "x", [4, 5], [9], 15)
    together, sizes = second_group(_scheduler(model), fresh)
    assert sizes == [2]  # both in one pass
    assert together["g1"] == alone["g1"]
    assert together["x"] == _reference(model, [4, 5], [9], 15)


def test_a_failed_prefill_pass_gives_every_admitted_groups_blocks_back(model) -> None:  # type: ignore[no-untyped-def]
    """Out of memory in a pass of several groups: the step fails, and aborting (as the decode
    loop does) returns every block the admitted groups were given."""
    scheduler = _scheduler(model)
    for name in ("a", "b", "c"):
        scheduler.submit(_request(model, name, [1, 2], [5], 8))

    def out_of_memory(items):  # type: ignore[no-untyped-def]
        raise torch.cuda.OutOfMemoryError(f"{len(items)} groups in one pass")

    scheduler.runner.prefill_many = out_of_memory
    with pytest.raises(torch.cuda.OutOfMemoryError, match="3 groups"):
        scheduler.step()
    assert scheduler.workspace.num_used > 0  # held by the admitted groups
    scheduler.abort_all()
    assert scheduler.workspace.num_used == 0


def test_a_full_pool_makes_a_sequence_wait_not_fail(model) -> None:  # type: ignore[no-untyped-def]
    # One sequence needs bos 1 + page 2 + prompt 1 + ring 2 = 6 blocks; the pool has 8.
    scheduler = _scheduler(model, blocks=8)
    for name in ("a", "b"):
        scheduler.submit(_request(model, name, [1], [5], 10))
    scheduler.step()
    assert len(scheduler.running) == 1 and len(scheduler.waiting) == 1  # "b" waits
    ours = _outputs(scheduler.run())
    assert ours["a"] == ours["b"] == _reference(model, [1], [5], 10)
    assert scheduler.workspace.peak_used == 6 and scheduler.workspace.num_used == 0


def test_the_decode_loop_waits_for_blocks_without_spinning(model) -> None:  # type: ignore[no-untyped-def]
    scheduler = _scheduler(model, blocks=8)
    loop = DecodeLoop(scheduler)
    held = loop.call(lambda: scheduler.workspace.allocate("someone else", 4 * BLOCK))
    steps = 0
    step = scheduler.step

    def counted_step() -> list[Finished]:
        nonlocal steps
        steps += 1
        return step()

    scheduler.step = counted_step  # type: ignore[method-assign]
    out: list[Finished] = []
    request = _request(model, "a", [1], [5], 10)  # needs 6 blocks; 4 are free
    waiter = threading.Thread(target=lambda: out.append(loop.decode(request)), daemon=True)
    waiter.start()
    time.sleep(0.5)
    assert not out and steps <= 2  # it waits on the loop's inbox, not in a busy loop
    loop.call(lambda: scheduler.workspace.free(held))
    waiter.join(30)
    assert out and out[0].sequence.generated == _reference(model, [1], [5], 10)


def test_continuous_batching_admits_a_request_when_another_finishes(model) -> None:  # type: ignore[no-untyped-def]
    scheduler = _scheduler(model, concurrency=2)
    for name, steps in (("short", 3), ("long", 12), ("late", 6)):
        scheduler.submit(_request(model, name, [1], [5], steps))
    scheduler.step()
    assert [s.seq_id for s, _ in scheduler.running] == ["short", "long"]
    scheduler.step()
    scheduler.step()  # "short" has its 3 tokens: retired, "late" joins on the next step
    scheduler.step()
    assert [s.seq_id for s, _ in scheduler.running] == ["long", "late"]
    ours = _outputs(scheduler.run())
    assert ours["late"] == _reference(model, [1], [5], 6)


def _reads_and_steps(
    scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, int]]:
    """A log of the scheduler's step launches and reads of chosen tokens, with their rows."""
    events: list[tuple[str, int]] = []
    decode = scheduler.runner.decode

    def logged_decode(sequences, tokens=None):  # type: ignore[no-untyped-def]
        events.append(("step", len(sequences)))
        return decode(sequences, tokens=tokens)

    read = Chosen.read

    def logged_read(chosen: Chosen) -> tuple[list[int], list[int]]:
        events.append(("read", chosen.tokens.shape[0]))
        return read(chosen)

    monkeypatch.setattr(scheduler.runner, "decode", logged_decode)
    monkeypatch.setattr(Chosen, "read", logged_read)
    return events


@pytest.mark.parametrize("at_once", [False, True])  # the default; tiles_bench's base
def test_a_groups_first_token_is_read_while_the_step_after_its_prefill_runs(  # type: ignore[no-untyped-def]
    model, monkeypatch, at_once: bool
) -> None:
    """A group admitted while another decodes: its pass's first token stays on the device, the
    next step feeds it and is launched before the host reads it (read at once, the card drains
    while the host reads it and rebuilds the batch), and both groups still decode what they
    decode alone, as they do with the token read at once."""
    scheduler = _scheduler(model)
    scheduler.first_tokens_at_once = at_once
    events = _reads_and_steps(scheduler, monkeypatch)
    scheduler.submit(_request(model, "a", [1], [5], 8))
    scheduler.step()
    first, step = ("read", 1), ("step", 1)
    assert events == ([first, step] if at_once else [step, first])  # read as its step runs
    events.clear()
    scheduler.submit(_request(model, "b", [2, 3], [6], 6))
    scheduler.step()
    both = ("step", 2)
    assert events == ([first, both, first] if at_once else [both, first, first])
    ours = _outputs(scheduler.run())
    assert ours["a"] == _reference(model, [1], [5], 8)
    assert ours["b"] == _reference(model, [2, 3], [6], 6)


@pytest.mark.parametrize("at_once", [False, True])
def test_groups_admitted_in_two_passes_beside_a_running_one_decode_as_alone(  # type: ignore[no-untyped-def]
    model, monkeypatch, at_once: bool
) -> None:
    """Two passes' first tokens unread beside the last step's (one group a pass), one of them a
    group of a single token, which never steps: every group decodes what it decodes alone."""
    scheduler = _scheduler(model)
    scheduler.first_tokens_at_once = at_once
    scheduler.prefill_max_rows = 1  # one group a pass
    scheduler.submit(_request(model, "a", [1], [5], 9))
    scheduler.step()
    scheduler.step()
    scheduler.submit(_request(model, "b", [2, 3], [6], 5))
    scheduler.submit(_request(model, "c", [4], [7], 1))
    events = _reads_and_steps(scheduler, monkeypatch)
    done = _outputs(scheduler.step())
    assert [e for e in events if e[0] == "step"] == [("step", 2)]  # a, b: c's one token is all
    assert (events[0] == ("step", 2)) != at_once  # deferred, the step goes first
    assert events.count(("read", 1)) == 3  # a's last token, b's and c's first
    done |= _outputs(scheduler.run())
    assert done["c"] == _reference(model, [4], [7], 1)
    assert done["a"] == _reference(model, [1], [5], 9)
    assert done["b"] == _reference(model, [2, 3], [6], 5)


def test_with_sr_swa_a_groups_first_token_is_read_before_its_first_step(  # type: ignore[no-untyped-def]
    model, monkeypatch
) -> None:
    """SR-SWA's blocks follow the page the guard has seen: its first token is read at once."""
    selector = BlockSelector(SrSwaSettings(max_blocks=2), block_size=BLOCK)
    scheduler = _scheduler(model, selector=selector)
    events = _reads_and_steps(scheduler, monkeypatch)
    scheduler.submit(_request(model, "a", [1], [5], 4))
    scheduler.step()
    assert events == [("read", 1), ("step", 1), ("read", 1)]


@pytest.mark.parametrize("fused", [False, True])  # the torch ops, then our kernels
def test_a_page_group_reuses_the_boundary_page_instead_of_recomputing_it(  # type: ignore[no-untyped-def]
    model, fused: bool
) -> None:
    scheduler = _scheduler(model, fused=fused)
    assert (scheduler.runner.fused is not None) == fused
    prompt = [5, 6]
    (first,) = scheduler.run_one(_request(model, "g0", [1, 2], prompt, 10, keep=(2,)))
    kept = first.kept  # BOS and page 2 stay in the pool, everything else went back
    assert [(s.kind, s.page_no) for s in kept] == [("bos", None), ("page", 2)]
    assert scheduler.workspace.num_used == 1 + 2  # bos block + page-2 blocks
    computed = scheduler.runner.prefill_rows_computed
    (second,) = scheduler.run_one(
        _request(model, "g1", [3], prompt, 12, reused=kept, with_bos=False)
    )
    assert scheduler.runner.prefill_rows_computed - computed == PAGE_TOKENS + len(prompt)
    free_segments(scheduler.workspace, second.kept)
    assert scheduler.workspace.num_used == 0

    # The reference: page 2's K/V as computed in group 0, placed at positions 1..7 in group 1.
    group0 = torch.cat([_tokens(model, [0]), _page(1), _page(2), _tokens(model, prompt)])
    with torch.no_grad():
        _, raw_keys, values = reference.forward(
            model, group0, torch.arange(group0.shape[0]), group0.shape[0], WINDOW
        )
    keep_rows = torch.cat([torch.tensor([0]), torch.arange(1 + PAGE_TOKENS, 1 + 2 * PAGE_TOKENS)])
    past = reference.Past(
        [k[keep_rows] for k in raw_keys],
        [v[keep_rows] for v in values],
        torch.arange(0, 1 + PAGE_TOKENS),
    )
    prefix = torch.cat([_page(3), _tokens(model, prompt)])
    expected = reference.greedy(
        model, prefix, 12, WINDOW, banned=(1,), past=past, first_position=1 + PAGE_TOKENS
    )
    assert second.sequence.generated == expected


def test_sr_swa_with_a_full_budget_is_r_swa_and_a_small_one_reads_within_it(model) -> None:  # type: ignore[no-untyped-def]
    specs = [("a", [1, 2, 3], [5, 6], 16)]
    full = BlockSelector(SrSwaSettings(max_blocks=10_000), block_size=BLOCK)
    assert _run(model, [_request(model, *s) for s in specs], selector=full)["a"] == (
        _reference(model, [1, 2, 3], [5, 6], 16)
    )
    small = BlockSelector(SrSwaSettings(max_blocks=1, page_gate=False), block_size=BLOCK)
    scheduler = _scheduler(model, selector=small)
    read: list[set[int]] = []
    select = small.select

    def recording(runner, layer, q, rows, valid, sequences):  # type: ignore[no-untyped-def]
        chosen, visible = select(runner, layer, q, rows, valid, sequences)
        read.append(set(chosen[0][visible[0]].tolist()))
        return chosen, visible

    small.select = recording  # type: ignore[method-assign]
    scheduler.submit(_request(model, *specs[0]))
    scheduler.step()  # admitted: its segments now have rows
    sequence = scheduler.running[0][0]
    always = {
        row
        for segment in sequence.segments
        if segment.kind in ("bos", "prompt")
        for row in scheduler.runner.rows(segment.blocks).tolist()
    }
    out = _outputs(scheduler.run())
    assert len(out["a"]) == 16 and read
    # Every step of every layer reads the BOS (an attention sink) and the prompt, plus at most
    # one other block and the window.
    assert all(always <= rows for rows in read)
    assert 0 < small.rows_read_max <= len(always) + 1 * BLOCK + WINDOW


def _run(model, requests, selector=None) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    scheduler = _scheduler(model, selector=selector)
    for request in requests:
        scheduler.submit(request)
    return _outputs(scheduler.run())


def _guarded(model, name: str, pages: list[int], budget: int, max_new: int) -> DecodeRequest:  # type: ignore[no-untyped-def]
    """A request whose guard steps in: EOS refused before the last page, a marker (id 7)
    forced when a page runs over ``budget``, no repeated 3-gram (the tiny model loops)."""
    request = _request(model, name, pages, [5, 6], max_new)
    request.ignore_eos = False
    request.guard = PageGuard(
        num_pages=len(pages),
        eos_id=1,
        marker_ids=(7,),
        page_budget=budget,
        token_text=lambda i: "<PAGE>" if i == 7 else f"w{i} ",
        ngram_size=3,
    )
    return request


def test_overlapped_steps_write_what_steps_read_one_by_one_write(model) -> None:  # type: ignore[no-untyped-def]
    """Each step is launched on the tokens the previous step chose on the device, before the
    host has read them; the guard's bans and forced markers are applied on the device. Every
    sequence must come out as when each step's tokens are read before the next is launched:
    the same ids, the same model choices, the same sections and flags; sequences joining and
    leaving mid-way included."""
    specs = [("a", [1, 2], 6, 40), ("b", [3], 9, 30), ("c", [4, 5, 6], 4, 50), ("d", [2], 5, 30)]
    outcomes = []
    for overlap in (False, True):
        scheduler = _scheduler(model, concurrency=3)  # "d" joins when another leaves
        scheduler.overlap = overlap
        for spec in specs:
            scheduler.submit(_guarded(model, *spec))
        finished = scheduler.run()
        outcomes.append(
            {
                f.sequence.seq_id: (
                    f.sequence.generated,
                    f.sequence.wanted,
                    f.sequence.guard.section_starts,
                    f.sequence.guard.flags,
                )
                for f in finished
            }
        )
        assert scheduler.workspace.num_used == 0
    one_by_one, overlapped = outcomes
    assert overlapped == one_by_one
    # The guard did step in: markers forced over budget, repeats refused, EOS held back.
    flags = set().union(*(f for _, _, _, by_page in one_by_one.values() for f in by_page.values()))
    assert {"token_budget_exhausted", "repetition_loop"} <= flags
    assert any(g != w for g, w, _, _ in one_by_one.values())
    for name, pages, *_ in specs:  # every page got its section
        assert len(one_by_one[name][2]) == len(pages), name


def test_a_group_beyond_the_models_positions_is_refused_alone(model) -> None:  # type: ignore[no-untyped-def]
    scheduler = _scheduler(model)
    scheduler.runner.max_positions = 40  # the real model has 32,768
    with pytest.raises(ValueError, match="exceed the model's 40 positions"):
        scheduler.submit(_request(model, "big", [1, 2, 3], [5], 30))
    assert _outputs(scheduler.run_one(_request(model, "ok", [1], [5], 20)))["ok"] == (
        _reference(model, [1], [5], 20)
    )


@pytest.mark.parametrize("fed", [5, 3 * WINDOW - 1])  # inside the ring; past its third wrap
def test_ids_fed_as_already_generated_continue_exactly_as_if_decoded(model, fed: int) -> None:  # type: ignore[no-untyped-def]
    """The boundary page's section, fed to the next group instead of being decoded again:
    when the feed is what the model would have written, everything after it is the same."""
    steps = 3 * WINDOW + 6
    decoded = _scheduler(model)
    (whole,) = decoded.run_one(_request(model, "a", [1, 2], [5, 6], steps))
    assert whole.sequence.generated == _reference(model, [1, 2], [5, 6], steps)
    shortcut = _scheduler(model)
    request = _request(model, "a", [1, 2], [5, 6], steps)
    request.already_generated = tuple(whole.sequence.generated[:fed])
    (resumed,) = shortcut.run_one(request)
    assert resumed.sequence.generated == whole.sequence.generated
    # One token comes from the prefill (or the feed) and one from each step after it.
    assert decoded.steps == steps - 1 and shortcut.steps == steps - fed - 1
    assert shortcut.workspace.num_used == 0  # the ring and the prefix went back to the pool


def test_the_ring_holds_the_fed_ids_kv_as_r_swa_computes_it(model) -> None:  # type: ignore[no-untyped-def]
    """Greedy ids hide small errors on tiny weights: check the values left in the ring (every
    layer) against the reference's R-SWA forward over prefix + fed ids."""
    fed = 3 * WINDOW - 1
    prefix = torch.cat([_tokens(model, [0]), _page(1), _page(2), _tokens(model, [5, 6])])
    ids = _reference(model, [1, 2], [5, 6], fed)
    scheduler = _scheduler(model)
    request = _request(model, "a", [1, 2], [5, 6], fed + 1)  # done at admission: no step
    request.already_generated = tuple(ids)
    (done,) = scheduler.run_one(request)
    assert scheduler.steps == 0 and done.sequence.generated[:fed] == ids
    rows = torch.cat([prefix, _tokens(model, ids)])
    with torch.no_grad():
        _, _, values = reference.forward(
            model, rows, torch.arange(rows.shape[0]), prefix.shape[0], WINDOW
        )
    ring = scheduler.runner.rows(done.sequence.ring, WINDOW)
    last = torch.arange(fed - WINDOW, fed)  # the ring keeps the window most recent
    for layer, expected in enumerate(values):
        stored = scheduler.runner.v_pool[layer, ring[last % WINDOW]]
        torch.testing.assert_close(stored, expected[prefix.shape[0] + last], rtol=1e-4, atol=1e-5)


def test_greedy_picks_what_argmax_picks_ties_and_all() -> None:
    """The scheduler's two-pass argmax: the first of equal maxima, wherever they fall
    (inside one chunk, across chunks, at either end of the vocabulary)."""
    from ocr_worker.engines.unlimited_ocr.step.sampling import greedy

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 129280, generator=g)
    logits[1, [5, 900]] = 50.0  # a tie inside the first chunk
    logits[2, [1009, 1010, 129279]] = 50.0  # across a chunk edge and at the very end
    logits[3, -1] = 60.0
    logits[4, 0] = 60.0
    logits[5] = 1.0  # all equal
    torch.testing.assert_close(greedy(logits), logits.argmax(-1), rtol=0, atol=0)
    assert greedy(logits).tolist()[1:] == [5, 1009, 129279, 0, 0]
    odd = torch.randn(3, 1000, generator=g)  # not a multiple of the chunks: plain argmax
    assert torch.equal(greedy(odd), odd.argmax(-1))


def test_an_interactive_group_takes_the_next_free_slot_ahead_of_the_backlog(model) -> None:  # type: ignore[no-untyped-def]
    """A GPU worker deep in an overnight backlog: every slot busy, backlog groups waiting. An
    app's interactive job arriving then is admitted at the next free slot, not after them, and
    decodes what it would have alone."""
    scheduler = _scheduler(model, concurrency=1)
    for name in ("backlog-1", "backlog-2", "backlog-3"):
        scheduler.submit(_request(model, name, [1], [5], 6))
    scheduler.step()  # backlog-1 holds the only slot
    urgent = _request(model, "app", [2], [6], 6)
    urgent.interactive = True
    scheduler.submit(urgent)
    finished = scheduler.run()
    assert [f.sequence.seq_id for f in finished] == ["backlog-1", "app", "backlog-2", "backlog-3"]
    alone = _run(model, [_request(model, "app", [2], [6], 6)])
    assert _outputs(finished)["app"] == alone["app"]
