"""The real engine path driven by output shaped like the real model's (docs/model.md, "Output
grammar"; transformers' integration tests for the v1 weights): several pages come as
``<PAGE><|det|>image [382, 87, 489, 174]<|/det|>\\n...``, one page on its own as det blocks
with no marker. Each page must get its own text and the right flags, in a first group and in
a later group whose first section is the context page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.unlimited_ocr.output.page_guard import (
    BUDGET_FLAG,
    EARLY_END_FLAG,
    EXTRA_SECTIONS_FLAG,
    LOOP_FLAG,
    PREAMBLE_FLAG,
)
from ocr_worker.engines.unlimited_ocr.output.sections import EMPTY_FLAG
from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine
from tests.worker.engines.unlimited_ocr.scripted_model import Script, ScriptedModel
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint
from uocr_core.contracts import PageResult
from uocr_core.settings import load_settings

BUDGET = 80  # tokens a page; every scripted page but the looping one fits well inside

PAGE_1 = (
    "<|det|>image [382, 87, 489, 174]<|/det|>\n"
    "<|det|>title [333, 190, 667, 230]<|/det|>Annual Report\n"
    "<|det|>text [100, 250, 899, 300]<|/det|>Revenue grew in every quarter.\n"
)
PAGE_2 = (
    "<|det|>header [53, 23, 365, 41]<|/det|>Advanced Template and Styles\n"
    "<|det|>table [100, 320, 899, 600]<|/det|><table><tr><td>Q1</td><td>10</td></tr></table>\n"
)
PAGE_3 = "<|det|>figure/chart [12, 34, 56, 78]<|/det|>\n<|det|>text [1, 2, 3, 4]<|/det|>年度报告\n"
PAGE_4 = "<|det|>text [100, 120, 899, 300]<|/det|>The package manager installs software.\n"
PAGE_5 = "<|det|>page_number [480, 960, 520, 980]<|/det|>32\n"
LOOP = "<tr><td>Q1</td></tr>"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-scripted"))


def _engine(path: Path, scripts: dict[str, Script], reuse: bool = True) -> UnlimitedOcrEngine:
    settings = load_settings(
        engine="unlimited_ocr",
        model_path=path,
        page_group_size=3,
        page_group_overlap=1,
        visual_cache_workspace_gb=0.01,
        unlimited_ocr={
            "max_tokens_per_page": BUDGET,
            "block_size": 4,
            "tile_size": 64,
            "reuse_boundary_section": reuse,
        },
    )
    engine = UnlimitedOcrEngine.from_settings(settings)
    ScriptedModel(engine, scripts)
    return engine


def _page(n: int) -> PageImage:
    rng = np.random.default_rng(n)
    return PageImage(n, rng.integers(0, 255, (200 + 10 * n, 150, 3), dtype=np.uint8))


def _texts(results: list[PageResult]) -> dict[int, str]:
    return {r.page: r.text for r in results}


def _flags(results: list[PageResult]) -> dict[int, list[str]]:
    return {r.page: r.warnings for r in results}


def test_each_page_gets_its_own_section_in_a_first_and_a_later_group(checkpoint: Path) -> None:
    scripts = {
        "doc:0": Script([PAGE_1, PAGE_2, PAGE_3]),
        # The later group is fed what group 0 wrote for its context page (3), as the model
        # would write it again, then writes pages 4 and 5.
        "doc:1": Script([PAGE_3, PAGE_4, PAGE_5]),
    }
    engine = _engine(checkpoint, scripts)
    first = engine.run_group(PageGroupInput("doc", 0, [], [_page(1), _page(2), _page(3)], False))
    assert _texts(first) == {
        1: "Annual Report\nRevenue grew in every quarter.",
        2: "Advanced Template and Styles\n<table><tr><td>Q1</td><td>10</td></tr></table>",
        3: "年度报告",
    }
    assert [b.label for b in first[0].blocks] == ["image", "title", "text"]
    assert [b.label for b in first[2].blocks] == ["figure/chart", "text"]
    assert first[0].blocks[1].bbox == (50.0, 39.9, 100.2, 48.3)  # 0-999 of a 150 x 210 page
    assert _flags(first) == {1: [], 2: [], 3: []}
    second = engine.run_group(PageGroupInput("doc", 1, [_page(3)], [_page(4), _page(5)], True))
    assert _texts(second) == {4: "The package manager installs software.", 5: "32"}
    assert [b.label for b in second[1].blocks] == ["page_number"]
    assert _flags(second) == {4: [], 5: []}


def test_a_document_reads_the_same_with_its_boundary_pages_fed_in_fewer_steps(
    checkpoint: Path,
) -> None:
    """Three groups whose model writes each boundary page's section again word for word: fed
    that section instead, the output ids are the same and each later group saves one decode
    step per id of it (the marker and page 3's or page 5's text)."""
    scripts = {
        "doc:0": Script([PAGE_1, PAGE_2, PAGE_3]),
        "doc:1": Script([PAGE_3, PAGE_4, PAGE_5]),
        "doc:2": Script([PAGE_5, PAGE_2, PAGE_1]),
    }
    groups = [
        PageGroupInput("doc", 0, [], [_page(1), _page(2), _page(3)], False),
        PageGroupInput("doc", 1, [_page(3)], [_page(4), _page(5)], False),
        PageGroupInput("doc", 2, [_page(5)], [_page(6), _page(7)], True),
    ]
    outputs, steps = {}, {}
    for reuse in (False, True):
        engine = _engine(checkpoint, scripts, reuse=reuse)
        outputs[reuse] = [_texts(engine.run_group(group)) for group in groups]
        steps[reuse] = engine.loop.scheduler.steps
    assert outputs[True] == outputs[False]
    assert outputs[True][2] == {
        6: "Advanced Template and Styles\n<table><tr><td>Q1</td><td>10</td></tr></table>",
        7: "Annual Report\nRevenue grew in every quarter.",
    }
    marker = len(engine.marker_ids)
    section_ids = sum(
        len(engine.tokenizer.encode(page, add_special_tokens=False).ids)
        for page in (PAGE_3, PAGE_5)
    )
    print(
        f"decode steps, 3 groups: {steps[False]} decoding boundary pages again, {steps[True]} fed"
    )
    assert steps[False] - steps[True] == 2 * marker + section_ids


def test_a_looping_page_is_cut_at_its_budget_and_the_next_page_keeps_its_own_text(
    checkpoint: Path,
) -> None:
    engine = _engine(checkpoint, {"loop:0": Script([PAGE_1, LOOP, PAGE_4], loops={1})})
    results = engine.run_group(PageGroupInput("loop", 0, [], [_page(1), _page(2), _page(3)], True))
    assert results[0].text.startswith("Annual Report") and results[0].warnings == []
    assert set(results[1].warnings) == {LOOP_FLAG, BUDGET_FLAG}
    assert results[2].text == "The package manager installs software."
    assert results[2].warnings == []


def test_a_page_the_model_skips_is_flagged_and_nothing_moves_onto_it(checkpoint: Path) -> None:
    # The model thinks there are two pages: it wants to stop after page 2.
    engine = _engine(checkpoint, {"skip:0": Script([PAGE_1, PAGE_2])})
    results = engine.run_group(PageGroupInput("skip", 0, [], [_page(1), _page(2), _page(3)], True))
    assert results[1].text.startswith("Advanced Template")
    assert EARLY_END_FLAG in results[1].warnings  # where the model wanted to stop
    assert results[2].status == "succeeded" and results[2].text == ""
    assert results[2].warnings == [EMPTY_FLAG]


def test_text_before_the_first_marker_and_an_extra_section_are_dropped_and_flagged(
    checkpoint: Path,
) -> None:
    script = Script([PAGE_4, PAGE_5, PAGE_1], preamble="Here are the pages.")
    engine = _engine(checkpoint, {"extra:0": script})
    results = engine.run_group(PageGroupInput("extra", 0, [], [_page(4), _page(5)], True))
    assert _texts(results) == {4: "The package manager installs software.", 5: "32"}
    assert results[0].warnings == [PREAMBLE_FLAG]
    assert results[1].warnings == [EXTRA_SECTIONS_FLAG]  # page 1's text went nowhere


def test_one_page_on_its_own_is_read_without_markers_in_gundam_mode(checkpoint: Path) -> None:
    engine = _engine(checkpoint, {"single:0": Script([PAGE_1], framed=False)})
    runner = engine.loop.scheduler.runner
    before = runner.prefill_rows_computed
    tall = PageImage(1, np.random.default_rng(1).integers(0, 255, (256, 128, 3), dtype=np.uint8))
    (result,) = engine.run_group(PageGroupInput("single", 0, [], [tall], True))
    assert result.text == "Annual Report\nRevenue grew in every quarter."
    assert result.warnings == []
    # A 128 x 256 page in 64-px tiles: 1 x 2 and 2 x 4 fit its shape exactly, and the larger
    # grid wins while the page has over half its area (as transformers' processor decides);
    # 8 one-query tiles, each row + its newline (4 x 3), then the 7-token global view, with
    # BOS and the prompt. The processor counts 2 x (2 + 1) + 1 + (4 x 1) x (2 x 1 + 1) = 19.
    prompt = len(engine.tokenizer.encode("document parsing.").ids)
    assert runner.prefill_rows_computed - before == 1 + (4 * 3 + 7) + prompt
