from __future__ import annotations

from ocr_worker.engines.unlimited_ocr.page_guard import BUDGET_FLAG, LOOP_FLAG, PageGuard

EOS, MARK = 1, 9


def _guard(**kwargs: int) -> PageGuard:
    defaults = {
        "num_pages": 3,
        "eos_id": EOS,
        "page_marker": (MARK,),
        "page_budget": 5,
        "ngram_size": 3,
        "window": 16,
    }
    return PageGuard(**{**defaults, **kwargs})  # type: ignore[arg-type]


def test_eos_is_refused_until_the_last_page() -> None:
    guard = _guard()
    assert EOS in guard.banned()
    for token in (20, MARK, 21, MARK):
        guard.observe(token)
    assert guard.page_index == 2 and EOS not in guard.banned()


def test_a_page_over_budget_is_closed_and_flagged() -> None:
    guard = _guard(num_pages=2, page_budget=3)
    for token in (30, 31, 32):
        assert guard.forced_token() is None
        guard.observe(token)
    assert guard.forced_token() == MARK  # page 1 is cut: the marker is forced
    guard.observe(MARK)
    assert guard.page_index == 1 and guard.flags == {0: {BUDGET_FLAG}}
    for token in (40, 41, 42):
        guard.observe(token)
    assert guard.forced_token() == EOS  # the last page ends with EOS
    guard.observe(EOS)
    assert guard.finished and guard.flags[1] == {BUDGET_FLAG}


def test_a_repeated_ngram_is_banned_and_a_loop_is_flagged() -> None:
    guard = _guard(page_budget=100)
    for token in (5, 6, 7, 5, 6):
        guard.observe(token)
    assert 7 in guard.banned()  # 5 6 7 would repeat
    guard.observe(8, wanted=7)
    assert guard.flags == {0: {LOOP_FLAG}}


def test_ngrams_older_than_the_window_are_forgotten() -> None:
    guard = _guard(page_budget=100, window=6)
    guard.seed([5, 6, 7])
    for token in (10, 11, 12, 13):
        guard.observe(token)
    for token in (5, 6):
        guard.observe(token)
    assert 7 not in guard.banned()
