"""The GPU engine class on the tiny checkpoint, on CPU, through the OcrEngine interface."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.unlimited_ocr.model.manifest import write_manifest
from ocr_worker.engines.unlimited_ocr.output.page_guard import BUDGET_FLAG
from ocr_worker.engines.unlimited_ocr.output.sections import kept_section_ids
from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, Finished
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint
from uocr_core.contracts import PageResult
from uocr_core.settings import load_settings

BUDGET = 6


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-engine"))
    write_manifest(path)
    return path


def _engine(path: Path, workspace_gb: float = 0.001, **options: Any) -> UnlimitedOcrEngine:
    settings = load_settings(
        engine="unlimited_ocr",
        model_path=path,
        page_group_size=3,
        page_group_overlap=1,
        visual_cache_workspace_gb=workspace_gb,
        unlimited_ocr={"max_tokens_per_page": BUDGET, "block_size": 4, **options},
    )
    return UnlimitedOcrEngine.from_settings(settings)


def _page(n: int) -> PageImage:
    rng = np.random.default_rng(n)
    return PageImage(n, rng.integers(0, 255, (200 + 10 * n, 150, 3), dtype=np.uint8))


def test_groups_yield_one_flagged_section_per_page_and_reuse_the_boundary(checkpoint: Path) -> None:
    engine = _engine(checkpoint)
    runner = engine.loop.scheduler.runner
    first = engine.run_group(PageGroupInput("doc", 0, [], [_page(1), _page(2), _page(3)], False))
    assert [r.page for r in first] == [1, 2, 3]
    assert all(r.status == "succeeded" and r.engine == "unlimited_ocr" for r in first)
    # Random weights rarely close a page by themselves: the guard cuts it at its budget, and
    # says so; it is never reported clean.
    assert all(BUDGET_FLAG in r.warnings or len(r.text.split()) < BUDGET for r in first)
    assert any(BUDGET_FLAG in r.warnings for r in first)
    # Each page's confidence: how sure the model was of the tokens it wrote there (random
    # weights over a tiny vocabulary: well short of 1, never 0).
    scores = [r.confidence for r in first if r.text]
    assert scores and all(s is not None and 0 < s < 1 for s in scores), scores
    rows_before = runner.prefill_rows_computed
    second = engine.run_group(PageGroupInput("doc", 1, [_page(3)], [_page(4), _page(5)], True))
    assert [r.page for r in second] == [4, 5]
    image_tokens = 7
    prompt_tokens = len(engine.tokenizer.encode("Multi page parsing.").ids)
    assert runner.prefill_rows_computed - rows_before == 2 * image_tokens + prompt_tokens
    workspace = engine.loop.scheduler.workspace
    assert workspace.num_used == 0  # the last group keeps nothing
    assert workspace.peak_used <= workspace.num_blocks


def test_a_corrupt_checkpoint_is_refused_naming_the_file(checkpoint: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in checkpoint.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(Exception, match="model.safetensors"):
        _engine(broken)


def test_kept_boundary_pages_expire_when_their_next_group_never_comes(checkpoint: Path) -> None:
    engine = _engine(checkpoint, kept_pages_seconds=0)
    workspace = engine.loop.scheduler.workspace
    engine.run_group(PageGroupInput("moved", 0, [], [_page(1), _page(2)], False))
    assert workspace.num_used > 0  # BOS and page 2 wait for group 1 (it went elsewhere)
    engine.run_group(PageGroupInput("other", 0, [], [_page(7)], True))
    assert workspace.num_used == 0


def test_kept_pages_give_way_to_a_group_that_needs_their_blocks(checkpoint: Path) -> None:
    # 10 blocks of 4 rows: a 2-page group needs 8 (BOS 1, pages 2 + 2, prompt 1, ring 2) and
    # keeps 3 (BOS and its boundary page) for a next group that went to another card.
    engine = _engine(checkpoint, workspace_gb=0.001 * 10 / 174)
    workspace = engine.loop.scheduler.workspace
    assert workspace.num_blocks == 10
    runner = engine.loop.scheduler.runner
    engine.run_group(PageGroupInput("elsewhere", 0, [], [_page(1), _page(2)], False))
    assert workspace.num_used == 3
    pages: list[PageResult] = []
    group = PageGroupInput("next", 0, [], [_page(3), _page(4)], True)
    worker = threading.Thread(target=lambda: pages.extend(engine.run_group(group)), daemon=True)
    worker.start()
    worker.join(60)  # a hang here is the bug: fail rather than wait forever
    assert [p.status for p in pages] == ["succeeded", "succeeded"]
    assert workspace.num_used == 0  # the old kept pages went back to the pool
    # Had its next group come here after all, it recomputes the boundary page: same pages out.
    rows_before = runner.prefill_rows_computed
    resumed = engine.run_group(PageGroupInput("elsewhere", 1, [_page(2)], [_page(5)], True))
    assert [p.page for p in resumed] == [5]
    prompt_tokens = len(engine.tokenizer.encode("Multi page parsing.").ids)
    assert runner.prefill_rows_computed - rows_before == 1 + 2 * 7 + prompt_tokens


def test_r_swa_the_trained_rule_is_the_default_and_sr_swa_is_opt_in(checkpoint: Path) -> None:
    assert _engine(checkpoint).loop.scheduler.runner.rule is R_SWA  # every prefix row read
    assert _engine(checkpoint, sr_swa=True).loop.scheduler.runner.rule.name == "sr-swa"


def test_the_stage_clock_accounts_each_stage_and_every_decoded_token(checkpoint: Path) -> None:
    """What bench/gpu_service_bench reads from the worker's log: vision, prefill and decode
    time, the decode loop's idle time, and a token count equal to what was decoded."""
    from ocr_worker.stage_clock import clock

    engine = _engine(checkpoint)
    runs = _recording(engine)
    before = clock.totals()
    engine.run_group(PageGroupInput("clock", 0, [], [_page(1), _page(2)], True))
    after = clock.totals()
    grown = {stage: after.get(stage, 0) - before.get(stage, 0) for stage in after}
    assert all(grown[stage] > 0 for stage in ("vision", "prefill", "decode", "idle"))
    # Every id the sequence wrote (the prefill's, then one a step), and not the step launched
    # before the host read the id that ended it.
    (run,) = runs
    assert grown["tokens"] == len(run.finished.sequence.generated)
    assert run.steps == len(run.finished.sequence.generated)  # that step was launched
    # The steps, and the sequences in them (one, alone): the bench's mean batch and ms a step.
    assert grown["steps"] == run.steps
    assert grown["step_rows"] == run.steps


def test_a_group_waiting_for_room_on_the_card_for_its_pixels_is_clocked(checkpoint: Path) -> None:
    """At 128 groups most waited for one of the few slots for pixels on the card, a wait the
    stage clock did not show: it is its own stage, so an operator sees where a group's time
    went."""
    from ocr_worker.stage_clock import clock

    engine = _engine(checkpoint)
    slots = engine._vision_slots
    held = 0
    while slots.acquire(blocking=False):  # every slot taken, as by groups at the tower
        held += 1
    before = clock.totals()
    done: list[PageResult] = []
    group = PageGroupInput("queued", 0, [], [_page(1), _page(2)], True)  # not gundam
    waiter = threading.Thread(target=lambda: done.extend(engine.run_group(group)), daemon=True)
    waiter.start()
    time.sleep(0.5)
    assert not done  # still waiting for a slot
    for _ in range(held):
        slots.release()
    waiter.join(60)
    assert [p.status for p in done] == ["succeeded", "succeeded"]
    assert clock.totals().get("vision_queue", 0) - before.get("vision_queue", 0) >= 0.3


DOCUMENT = [  # three groups of three pages, each later one opening with its boundary page
    PageGroupInput("doc", 0, [], [_page(1), _page(2), _page(3)], False),
    PageGroupInput("doc", 1, [_page(3)], [_page(4), _page(5)], False),
    PageGroupInput("doc", 2, [_page(5)], [_page(6), _page(7)], True),
]


@dataclass
class Run:
    request: DecodeRequest
    finished: Finished
    steps: int  # decode steps while it ran (alone)

    @property
    def generated(self) -> list[int]:
        return self.finished.sequence.generated


def _recording(engine: UnlimitedOcrEngine) -> list[Run]:
    """Every request ``engine`` decodes, run one at a time, and what came of it."""
    runs: list[Run] = []
    decode, scheduler = engine.loop.decode, engine.loop.scheduler

    def recorded(request: DecodeRequest) -> Finished:
        before = scheduler.steps
        finished = decode(request)
        runs.append(Run(request, finished, scheduler.steps - before))
        return finished

    engine.loop.decode = recorded  # type: ignore[method-assign]
    return runs


def _timeless(results: list[PageResult]) -> list[PageResult]:
    return [r.model_copy(update={"duration_ms": 0}) for r in results]


def test_the_boundary_page_is_fed_not_decoded_again(checkpoint: Path) -> None:
    """A 3-group document on the tiny weights, the boundary page decoded again (today's way)
    and fed from the previous group's output. Fed exactly what the model writes when it
    decodes the page again, the next group's every id is the same; fed the previous group's
    own section, it takes fewer decode steps and still reads every page."""
    again = _engine(checkpoint, reuse_boundary_section=False)
    decoded = _recording(again)
    results_again = [_timeless(again.run_group(group)) for group in DOCUMENT]
    assert all(not run.request.already_generated for run in decoded)

    fed = _engine(checkpoint)
    runs = _recording(fed)
    assert _timeless(fed.run_group(DOCUMENT[0])) == results_again[0]
    first = decoded[0].finished.sequence
    kept = fed.kept._by_job["doc"]
    boundary_opened = first.guard.section_starts[2]  # page 3's section, then EOS
    assert kept.section_ids == (*fed.marker_ids, *first.generated[boundary_opened:-1])
    # What the model writes for page 3 when it decodes it again in group 1: everything before
    # the marker that opens page 4 (the guard forced that marker, so it is spelled as ours).
    redecoded = decoded[1].finished.sequence
    page_4_opened = redecoded.guard.section_starts[1]
    page_4_marker = page_4_opened - len(fed.marker_ids)
    assert tuple(redecoded.generated[page_4_marker:page_4_opened]) == fed.marker_ids
    kept.section_ids = tuple(redecoded.generated[:page_4_marker])
    assert _timeless(fed.run_group(DOCUMENT[1])) == results_again[1]
    assert runs[1].generated == redecoded.generated
    assert runs[1].steps == decoded[1].steps - page_4_marker

    # Group 2 is fed group 1's own section for page 5, as the engine keeps it.
    results = fed.run_group(DOCUMENT[2])
    assert [r.page for r in results] == [6, 7] and all(r.status == "succeeded" for r in results)
    assert runs[2].request.already_generated == kept_section_ids(
        runs[1].generated, runs[1].finished.sequence.guard, pages_kept=1, marker_ids=fed.marker_ids
    )
    # One id from the prefill (or the feed), then one per step; and one step more, launched
    # before the host had read the id that ended the group (the scheduler's overlap).
    for run in runs:
        assert run.steps == len(run.generated) - len(run.request.already_generated)
    print(
        "decode steps for 3 groups:",
        [r.steps for r in decoded],
        "decoding the boundary page again,",
        [r.steps for r in runs],
        "fed",
    )
    assert runs[2].steps < decoded[2].steps
