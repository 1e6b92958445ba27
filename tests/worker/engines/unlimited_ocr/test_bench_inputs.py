"""The engine bench's sequences stand for documents decoding side by side: none may be a copy
of another. Alike sequences choose alike tokens and route them to the same experts, so a step
of them reads far fewer experts' weights than a step of documents (measured on an H100: the
experts' kernels a third faster at 16 sequences, 62% at 128; bench/RESULTS.md, "GPU engine:
kernels")."""

from __future__ import annotations

import argparse

import pytest
import torch

from bench.engine import setup as engine_bench
from bench.engine.setup import Engine
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest
from uocr_core.page_groups import PageGroupPlanner


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setattr(engine_bench, "PAGE_TOKENS", 7)  # the tiny model's few positions
    parser = argparse.ArgumentParser()
    engine_bench.engine_options(parser, workspace_gb=0.05)
    args = parser.parse_args(["--tiny"])
    cpu = torch.device("cpu")
    return Engine(engine_bench.build_model(True, cpu, torch.float32), args, cpu, torch.float32, 0)


def test_every_sequence_of_a_steady_step_reads_pages_of_its_own(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[DecodeRequest] = []
    submit = engine.scheduler.submit

    def recorded(request: DecodeRequest) -> None:
        submitted.append(request)
        submit(request)

    monkeypatch.setattr(engine.scheduler, "submit", recorded)
    engine.step_ms(sequences=70, pages=3, steps=1)  # past the 64 stand-ins
    page_lists = [
        tuple(segment.embeds.data_ptr() for segment in request.new if segment.kind == "page")
        for request in submitted
    ]
    assert len(page_lists) == 70 and all(len(pages) == 3 for pages in page_lists)
    assert len(set(page_lists)) == 70


def test_the_documents_of_a_throughput_run_read_pages_of_their_own() -> None:
    """engine_bench's 128 documents of 100 pages, group by group as Engine.document plans them:
    in every group, each document's pages (as stand-ins; the page the group reuses from the
    one before included) differ from every other's."""
    groups = PageGroupPlanner(size=8, overlap=1).plan(100)
    seeds = [engine_bench.distinct_pages(i, 100) for i in range(128)]
    for group in groups:
        positions = range(group.first_position, group.last_position + 1)
        page_lists = {
            tuple(seeds[i][p] % engine_bench.STAND_INS for p in positions) for i in range(128)
        }
        assert len(page_lists) == 128, group
