"""CUDA graphs for the decode step: a Python-driven step launches ~600 kernels, so on the GPU
the host, not the chip, sets the pace (docs/model.md, "Baseline: transformers' generate").
Each (batch, rows) bucket is captured once with static input buffers and replayed; padding
slots read and write a scratch row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ocr_worker.engines.unlimited_ocr.step.batch_rows import BatchRows
from ocr_worker.engines.unlimited_ocr.step.sampling import pinned


class StepRunner(Protocol):
    """What the graphs need of the model runner: its pure-tensor decode step."""

    device: torch.device
    scratch_row: int  # padding slots read and write this pool row

    def step(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        generated: torch.Tensor,
        batch: BatchRows,
    ) -> torch.Tensor: ...


ROW_BUCKET = 128


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    tokens: torch.Tensor  # (Bb,)
    numbers: torch.Tensor  # (2, Bb): each slot's position, then its generated count
    batch: BatchRows  # static row buffers, padded to (Bb, Rb)
    logits: torch.Tensor  # (Bb, V), written by replay
    source: BatchRows | None = None  # the batch whose rows the buffers hold now
    count: int = 0  # live slots last replayed; those past it hold padding


class CudaGraphSteps:
    def __init__(self, runner: StepRunner) -> None:
        self.runner = runner
        self.pool = torch.cuda.graph_pool_handle()
        self.captured: dict[tuple[int, int], _Captured] = {}

    def run(self, batch: BatchRows, tokens: torch.Tensor, numbers: list[list[int]]) -> torch.Tensor:
        """``numbers``: each sequence's position, then its generated count, from the host
        (one copy into the graph's buffer)."""
        count, width = batch.rows.shape
        key = (1 << (count - 1).bit_length(), -(-width // ROW_BUCKET) * ROW_BUCKET)
        entry = self.captured.get(key) or self._capture(*key, window=batch.window)
        if entry.source is not batch:
            self._load_rows(entry, batch)
        if entry.count != count:  # padding slots: token 0 at position 0, one generated
            entry.tokens[count:].zero_()
            entry.count = count
        entry.tokens[:count].copy_(tokens)
        padding = key[0] - count
        positions, generated = numbers
        entry.numbers.copy_(
            pinned([positions + [0] * padding, generated + [1] * padding]), non_blocking=True
        )
        entry.graph.replay()
        return entry.logits[:count]

    def _load_rows(self, entry: _Captured, batch: BatchRows) -> None:
        static, (count, width) = entry.batch, batch.rows.shape
        _pad(static, self.runner.scratch_row)
        static.rows[:count, :width].copy_(batch.rows)
        static.prefix_valid[:count, :width].copy_(batch.prefix_valid)
        static.ring_column[:count, :width].copy_(batch.ring_column)
        static.ring_rows[:count].copy_(batch.ring_rows)
        entry.source = batch

    def _capture(self, count: int, width: int, *, window: int) -> _Captured:
        device = self.runner.device
        static = BatchRows(
            rows=torch.empty(count, width, dtype=torch.long, device=device),
            prefix_valid=torch.empty(count, width, dtype=torch.bool, device=device),
            ring_column=torch.empty(count, width, dtype=torch.long, device=device),
            ring_rows=torch.empty(count, window, dtype=torch.long, device=device),
            window=window,
            scored=False,
        )
        _pad(static, self.runner.scratch_row)
        tokens = torch.zeros(count, dtype=torch.long, device=device)
        numbers = torch.zeros(2, count, dtype=torch.long, device=device)
        numbers[1] = 1
        positions, generated = numbers
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(2):  # warm-up outside the graph (kernel selection, workspaces)
                self.runner.step(tokens, positions, generated, static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the task threads run the vision tower meanwhile; under the default
        # "global" mode their allocations and syncs would abort this capture.
        capture = torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local")
        with capture, torch.no_grad():
            logits = self.runner.step(tokens, positions, generated, static)
        entry = _Captured(graph, tokens, numbers, static, logits)
        self.captured[(count, width)] = entry
        return entry


def _pad(static: BatchRows, scratch_row: int) -> None:
    """Every slot reads and writes the scratch row; column 0 stays valid so softmax is finite."""
    static.rows.fill_(scratch_row)
    static.ring_rows.fill_(scratch_row)
    static.prefix_valid.zero_()
    static.prefix_valid[:, 0] = True
    static.ring_column.fill_(-1)
