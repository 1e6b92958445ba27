"""The engine bench's steady step stands for documents decoding side by side: its sequences
must not be copies of each other. Alike sequences choose alike tokens and route them to the
same experts, so a step of them reads far fewer experts' weights than a step of documents
(bench/RESULTS.md, run M: the experts' kernels 37% faster at 16 sequences, 62% at 128)."""

from __future__ import annotations

import argparse

import pytest
import torch

from bench import engine_bench
from bench.engine_bench import Engine
from ocr_worker.engines.unlimited_ocr.scheduler import DecodeRequest


@pytest.fixture(scope="module")
def engine() -> Engine:
    parser = argparse.ArgumentParser()
    engine_bench.engine_options(parser, workspace_gb=0.05)
    args = parser.parse_args(["--tiny"])
    model, _, dtype = engine_bench.bench_model(tiny=True)
    return Engine(model.cpu(), args, torch.device("cpu"), dtype, 0)


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
