"""The page guard on id streams framed as the real model frames them: ``<PAGE>`` opens each
page's section (transformers' multi-page integration test expects the output to begin
``<PAGE>image [382, ...``), and the model may spell the marker with any ids."""

from __future__ import annotations

import math

import pytest
import torch

from ocr_worker.engines.unlimited_ocr.output.page_guard import (
    BUDGET_FLAG,
    EARLY_END_FLAG,
    EXTRA_SECTIONS_FLAG,
    LOOP_FLAG,
    PREAMBLE_BUDGET,
    PREAMBLE_FLAG,
    PageGuard,
)
from ocr_worker.engines.unlimited_ocr.output.sections import kept_section_ids
from ocr_worker.engines.unlimited_ocr.step.sampling import choose, chosen_logprobs

EOS = 1
# "<PAGE>" as one id (9), or spelled "<" (10) "PAGE" (11) ">" (12), or ">\n" (13) at the end.
TEXTS = {9: "<PAGE>", 10: "<", 11: "PAGE", 12: ">", 13: ">\n"}
MARK = (9,)
SPELLED = (10, 11, 13)


def _text(token: int) -> str:
    return TEXTS.get(token, f" w{token}")


def _guard(**kwargs: object) -> PageGuard:
    defaults: dict[str, object] = {
        "num_pages": 3,
        "eos_id": EOS,
        "marker_ids": MARK,
        "page_budget": 5,
        "token_text": _text,
        "ngram_size": 3,
        "window": 16,
    }
    return PageGuard(**{**defaults, **kwargs})  # type: ignore[arg-type]


def _feed(guard: PageGuard, tokens: tuple[int, ...] | list[int]) -> None:
    for token in tokens:
        guard.observe(token)


def test_the_marker_opens_a_page_and_eos_waits_for_the_last_pages_section() -> None:
    guard = _guard()
    assert guard.page_index == -1 and EOS in guard.banned()  # nothing opened yet
    _feed(guard, [*MARK, 20, *MARK, 21])
    assert guard.page_index == 1 and EOS in guard.banned()  # page 2 of 3 is being written
    _feed(guard, [*SPELLED, 22])  # the model spells the marker with other ids
    assert guard.page_index == 2 and EOS not in guard.banned()
    assert guard.flags == {}


def test_a_page_over_budget_is_closed_by_the_next_marker_and_flagged_on_itself() -> None:
    guard = _guard(num_pages=2, page_budget=3)
    _feed(guard, [*MARK])
    for token in (30, 31, 32):
        assert guard.forced_token() is None
        guard.observe(token)
    assert guard.forced_token() == MARK[0]  # page 1 is cut: page 2's marker is forced
    guard.observe(MARK[0])
    assert guard.page_index == 1 and guard.flags == {0: {BUDGET_FLAG}}
    for token in (40, 41, 42):
        guard.observe(token)
    assert guard.forced_token() == EOS  # the last page ends with EOS
    guard.observe(EOS)
    assert guard.finished and guard.flags[1] == {BUDGET_FLAG}


def test_text_before_the_first_marker_is_no_page_and_is_cut_short() -> None:
    guard = _guard()
    for token in range(100, 100 + PREAMBLE_BUDGET):
        assert guard.forced_token() is None
        guard.observe(token)
    assert guard.forced_token() == MARK[0]
    guard.observe(MARK[0])
    assert guard.page_index == 0 and guard.flags == {0: {PREAMBLE_FLAG}}


def test_a_section_for_a_page_that_does_not_exist_ends_decoding() -> None:
    guard = _guard(num_pages=2, page_budget=100)
    _feed(guard, [*MARK, 20, *MARK, 21])
    guard.observe(MARK[0])  # a third section for two pages
    assert guard.forced_token() == EOS
    guard.observe(EOS)
    assert guard.finished and guard.page_index == 1
    assert guard.flags == {1: {EXTRA_SECTIONS_FLAG}}


def test_the_model_wanting_to_stop_early_is_flagged_on_the_page_it_was_writing() -> None:
    guard = _guard(page_budget=100)
    _feed(guard, [*MARK, 20])
    assert EOS in guard.banned()
    guard.observe(*MARK, wanted=EOS)  # EOS was refused; the next marker was chosen instead
    assert guard.flags == {0: {EARLY_END_FLAG}} and guard.page_index == 1


def test_one_page_on_its_own_has_no_markers() -> None:
    guard = _guard(num_pages=1, framed=False, page_budget=4)
    assert guard.page_index == 0 and EOS not in guard.banned()
    _feed(guard, [20, *MARK, 21, 22])  # a stray marker opens nothing
    assert guard.page_index == 0
    assert guard.forced_token() == EOS and guard.flags == {0: {BUDGET_FLAG}}


def test_a_repeated_ngram_is_banned_and_a_loop_is_flagged() -> None:
    guard = _guard(page_budget=100)
    _feed(guard, [*MARK, 5, 6, 7, 5, 6])
    assert 7 in guard.banned()  # 5 6 7 would repeat
    guard.observe(8, wanted=7)
    assert guard.flags == {0: {LOOP_FLAG}}


def test_ngrams_older_than_the_window_are_forgotten() -> None:
    guard = _guard(page_budget=100, window=6)
    guard.seed([5, 6, 7])
    _feed(guard, [*MARK, 10, 11, 12, 5, 6])
    assert 7 not in guard.banned()


def _kept(guard: PageGuard, output: list[int], pages_kept: int = 1) -> tuple[int, ...]:
    _feed(guard, output)
    return kept_section_ids(output, guard, pages_kept=pages_kept, marker_ids=MARK)


def test_the_boundary_pages_sections_are_kept_as_written_with_the_marker_first() -> None:
    output = [*MARK, 20, *MARK, 21, 22, *SPELLED, 23, 24, EOS]
    assert _kept(_guard(), output) == (*MARK, 23, 24)  # the marker spelled as ours, no EOS
    assert _kept(_guard(), output, pages_kept=2) == (*MARK, 21, 22, *SPELLED, 23, 24)


def test_no_section_is_kept_from_an_output_that_did_not_end_cleanly() -> None:
    cut_off = [*MARK, 20, *MARK, 21, *MARK, 23]  # the token budget ran out: no EOS
    assert _kept(_guard(), cut_off) == ()
    two_sections = [*MARK, 20, *MARK, EOS]  # three pages, two sections (EOS forced by a test)
    assert _kept(_guard(), two_sections) == ()
    extra = [*MARK, 20, *MARK, 21, *MARK, 22, *MARK, EOS]  # a fourth section for three pages
    assert _kept(_guard(), extra) == ()
    assert _kept(_guard(num_pages=1, framed=False), [20, 21, EOS]) == ()  # unframed


def test_a_pages_confidence_is_the_geometric_mean_of_its_tokens_probabilities() -> None:
    """Per section, from the log-probabilities the model gave the tokens it chose; tokens the
    guard forced (closing a page over budget) are not the model's reading and do not count."""
    guard = _guard(num_pages=2, page_budget=3)
    guard.observe(MARK[0], logprob=-0.2)  # before the first section: no page's
    for token, logprob in ((30, math.log(0.9)), (31, math.log(0.4)), (32, math.log(0.9))):
        guard.observe(token, logprob=logprob)
    assert guard.forced_token() == MARK[0]
    guard.observe(MARK[0], logprob=math.log(1e-6))  # forced: left out
    guard.observe(40, logprob=float("nan"))  # a NaN logit row: left out, never a NaN score
    assert guard.confidence(0) == pytest.approx((0.9 * 0.4 * 0.9) ** (1 / 3), abs=1e-4)
    assert guard.confidence(1) is None  # nothing the model wrote there counted
    guard.observe(41, logprob=math.log(0.5))
    assert guard.confidence(1) == pytest.approx(0.5)


def test_the_chosen_tokens_log_probability_is_log_softmax_at_it() -> None:
    logits = torch.randn(4, 129_280, generator=torch.Generator().manual_seed(3)) * 4
    chosen = torch.tensor([0, 7, 129_279, 50_000])
    expected = torch.log_softmax(logits.double(), -1)[torch.arange(4), chosen].float()
    assert torch.allclose(chosen_logprobs(logits, chosen), expected, atol=1e-4)
    # bf16 logits (the card's): the row reduced in float32 inside, within bf16's rounding
    half = chosen_logprobs(logits.bfloat16(), chosen)
    assert torch.allclose(half, expected, atol=0.1)
    assert choose(logits, [set()] * 4, [None] * 4).read_logprobs() == pytest.approx(
        torch.log_softmax(logits, -1).max(-1).values.tolist(), abs=1e-4
    )
