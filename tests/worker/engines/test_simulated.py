"""The simulated engine (capacity tests): a configured time a group on one simulated card, and
deterministic results of a configured size whose boxes lie on the page; through the pipeline
like any engine; never in production."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ocr_worker.engines.base import PageGroupInput, PageImage
from ocr_worker.engines.factory import make_engine
from ocr_worker.engines.simulated import SimulatedEngine
from ocr_worker.outputs.readback import load_page_results
from uocr_core.settings import SettingsError, SimulatedEngineSettings, load_settings


def _group(job_id: str, pages: list[int]) -> PageGroupInput:
    images = [PageImage(p, np.zeros((256, 181, 3), np.uint8), size=(1654, 2339)) for p in pages]
    return PageGroupInput(job_id, 0, [], images, is_last=True)


def _engine(**overrides: object) -> SimulatedEngine:
    defaults = {"seconds_per_page": 0.0, "tokens_per_page": 100, "blocks_per_page": 4}
    return SimulatedEngine(SimulatedEngineSettings.model_validate({**defaults, **overrides}))


def test_pages_read_the_same_every_time_and_differ_from_page_to_page() -> None:
    engine = _engine()
    first, again = (
        engine.run_group(_group("job-a", [1, 2])),
        engine.run_group(_group("job-a", [1, 2])),
    )
    assert [r.text for r in first] == [r.text for r in again]
    assert first[0].text != first[1].text
    assert first[0].text != engine.run_group(_group("job-b", [1]))[0].text
    # A confidence a page, the same each time, spread like a real scan's.
    assert [r.confidence for r in first] == [r.confidence for r in again]
    assert all(r.confidence is not None and 0.6 <= r.confidence <= 1.0 for r in first)


def test_a_page_has_the_configured_length_and_blocks_inside_the_page() -> None:
    engine = _engine(tokens_per_page=700, chars_per_token=3.5, blocks_per_page=12)
    (page,) = engine.run_group(_group("job", [7]))
    assert page.status == "succeeded" and page.engine == "simulated" and page.page == 7
    assert 0.9 * 2450 <= len(page.text) <= 1.2 * 2450
    assert len(page.blocks) == 12 and page.blocks[0].label == "title"
    assert (page.width, page.height) == (1654, 2339)  # the page at the service's dpi
    for block in page.blocks:
        x1, y1, x2, y2 = block.bbox
        assert 0 <= x1 < x2 <= 1654 and 0 <= y1 < y2 <= 2339
    assert page.markdown.startswith("# ")


def test_a_group_takes_its_time_and_groups_at_once_take_turns_on_the_card() -> None:
    engine = _engine(seconds_per_group=0.15, tokens_per_page=0)
    counted: list[int] = []
    engine.count_tokens = counted.append
    started = time.perf_counter()
    threads = [
        threading.Thread(target=engine.run_group, args=(_group(f"j{n}", [1]),)) for n in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.perf_counter() - started >= 0.45  # one card: three groups one after another
    assert counted == [0, 0, 0]


def test_the_settings_choose_it_and_production_refuses_it() -> None:
    settings = load_settings(engine="simulated", simulated={"tokens_per_page": 50})
    engine = make_engine(settings)
    assert isinstance(engine, SimulatedEngine) and engine.settings.tokens_per_page == 50
    assert settings.page_groups_in_parallel  # it keeps no state between groups
    with pytest.raises(SettingsError, match="capacity tests"):
        load_settings(engine="simulated", environment="production", s3={"secret_access_key": "x"})


def test_a_document_runs_through_the_pipeline_with_it(harness) -> None:  # type: ignore[no-untyped-def]
    job_id = harness.submit(7)
    harness.drain(_engine(tokens_per_page=40))
    job = harness.job(job_id)
    assert (job.status, job.pages_done) == ("succeeded", 7)
    results = load_page_results(harness.store, job)
    assert [r.page for r in results] == list(range(1, 8))
    assert all(r.engine == "simulated" and len(r.text) >= 100 for r in results)
