"""On the GPU: the CUDA-graphed decode step gives the tokens of the eager step (tiny weights)."""

from __future__ import annotations

import pytest
import torch

from ocr_worker.engines.unlimited_ocr.kv_workspace import VisualKVWorkspace
from ocr_worker.engines.unlimited_ocr.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.scheduler import DecodeRequest, NewSegment, Scheduler
from ocr_worker.engines.unlimited_ocr.sr_swa import BlockSelector, SrSwaSettings
from tests.worker.engines.unlimited_ocr.tiny_model import WINDOW, write_tiny_checkpoint

pytestmark = pytest.mark.gpu


def _run(model, graphs: bool, selector: bool) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    device = torch.device("cuda")
    workspace = VisualKVWorkspace(num_blocks=256, block_size=4)
    runner = ModelRunner(
        model,
        num_blocks=256,
        block_size=4,
        device=device,
        dtype=torch.float32,
        cuda_graphs=graphs,
        selector=BlockSelector(SrSwaSettings(max_blocks=3), block_size=4) if selector else None,
    )
    scheduler = Scheduler(runner, workspace, max_concurrency=3, window=WINDOW)
    embed = model.model.language_model.embed_tokens
    for n, steps in enumerate((30, 12, 21, 17)):  # ragged, and one joins mid-way
        gen = torch.Generator(device=device).manual_seed(n)
        pages = [
            NewSegment("page", torch.randn(7, 64, device=device, generator=gen), page_no=p)
            for p in range(n + 1)
        ]
        new = [
            NewSegment("bos", embed(torch.tensor([0], device=device))),
            *pages,
            NewSegment("prompt", embed(torch.tensor([5, 6], device=device))),
        ]
        guard = PageGuard(num_pages=1, eos_id=1, page_marker=(), page_budget=10**6, ngram_size=0)
        scheduler.submit(DecodeRequest(f"s{n}", [], new, guard, steps, ignore_eos=True))
    finished = {f.sequence.seq_id: f.sequence.generated for f in scheduler.run()}
    assert (runner.graphs is not None) == graphs  # the graphed run really replayed graphs
    if graphs:
        assert runner.graphs.captured  # type: ignore[union-attr]
    return finished


@pytest.mark.parametrize("selector", [False, True])
def test_graphed_decode_equals_eager(tmp_path, selector: bool) -> None:  # type: ignore[no-untyped-def]
    from ocr_worker.engines.unlimited_ocr.checkpoint import load_model

    model = load_model(
        write_tiny_checkpoint(tmp_path), device=torch.device("cuda"), dtype=torch.float32
    )
    assert _run(model, graphs=True, selector=selector) == _run(
        model, graphs=False, selector=selector
    )
