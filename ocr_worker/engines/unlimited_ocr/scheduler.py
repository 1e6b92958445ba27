"""Continuous batching: up to ``max_concurrency`` sequences share each decode step.

A request joins when the workspace has blocks for its new segments and its ring; otherwise it
first asks ``reclaim`` to give back cached blocks (boundary pages kept for a next group), then
waits (a full pool makes a sequence wait, never fail). After each step, finished sequences give
their blocks back, except the segments their document keeps for its next page group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ocr_worker.engines.unlimited_ocr.kv_workspace import VisualKVWorkspace, WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.sequence import Segment, Sequence
from ocr_worker.stage_clock import clock


@dataclass
class NewSegment:
    kind: str
    embeds: torch.Tensor  # (T, hidden)
    page_no: int | None = None


@dataclass
class DecodeRequest:
    seq_id: str
    reused: list[Segment]  # already in the pool (BOS, boundary pages): moved, not recomputed
    new: list[NewSegment]
    guard: PageGuard
    max_new_tokens: int
    keep_pages: tuple[int, ...] = ()  # page numbers whose KV the next group reuses
    ignore_eos: bool = False  # benchmarks force output lengths
    # Output already written for the context pages by the document's previous group: fed as if
    # this sequence had generated it (the guard sees it too), so it is not decoded again.
    already_generated: tuple[int, ...] = ()


@dataclass
class Finished:
    sequence: Sequence
    kept: list[Segment]


@dataclass
class Scheduler:
    runner: ModelRunner
    workspace: VisualKVWorkspace
    max_concurrency: int
    window: int
    waiting: deque[DecodeRequest] = field(default_factory=deque)
    running: list[tuple[Sequence, DecodeRequest]] = field(default_factory=list)
    steps: int = 0  # decode steps run, for benchmarks
    # Frees some cached blocks (kept boundary pages) and says whether it did; a cache must never
    # keep a waiting request out of a pool that running sequences do not fill.
    reclaim: Callable[[], bool] | None = None

    def submit(self, request: DecodeRequest) -> None:
        """Queue a request; one that could never run is refused here, alone."""
        prefix = sum(s.num_tokens for s in request.reused) + sum(
            n.embeds.shape[0] for n in request.new
        )
        if prefix + request.max_new_tokens > self.runner.max_positions:
            raise ValueError(
                f"{request.seq_id}: a {prefix}-token prefix and {request.max_new_tokens} new "
                f"tokens exceed the model's {self.runner.max_positions} positions; "
                "use smaller page groups"
            )
        if (
            self.workspace.blocks_for(self.window)
            + sum(self.workspace.blocks_for(n.embeds.shape[0]) for n in request.new)
            > self.workspace.num_blocks
        ):
            raise ValueError(f"{request.seq_id}: needs more blocks than the whole workspace has")
        self.waiting.append(request)

    def step(self) -> list[Finished]:
        """Admit what fits, run one decode step for every running sequence, retire the done."""
        self._admit()
        active = [(s, r) for s, r in self.running if not s.finished]
        if active:
            self.steps += 1
            with clock.timed("decode"):  # sampling reads the logits: the step's GPU work is done
                self._sample_all(active, self.runner.decode([s for s, _ in active]))
            clock.add("tokens", len(active))
        return self._retire()

    def run(self) -> list[Finished]:
        done: list[Finished] = []
        while self.waiting or self.running:
            finished = self.step()
            if not finished and not self.running and self.waiting:
                raise RuntimeError("a request can never fit in the workspace")
            done += finished
        return done

    def run_one(self, request: DecodeRequest) -> list[Finished]:
        self.submit(request)
        return self.run()

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.max_concurrency:
            sequence = self._allocate(self.waiting[0])
            while sequence is None and self.reclaim is not None and self.reclaim():
                sequence = self._allocate(self.waiting[0])
            if sequence is None:
                return  # no room: wait for blocks
            request = self.waiting.popleft()
            new = sequence.segments[len(request.reused) :]
            embeds = torch.cat([n.embeds for n in request.new])
            with clock.timed("prefill"):
                logits = self.runner.prefill(sequence, new, embeds)
                if request.already_generated:
                    logits = self._feed(sequence, list(request.already_generated))
                self.running.append((sequence, request))
                self._sample(sequence, request, logits)
            clock.add("tokens", 1)

    def _allocate(self, request: DecodeRequest) -> Sequence | None:
        sizes = [n.embeds.shape[0] for n in request.new] + [self.window]
        needed = sum(self.workspace.blocks_for(size) for size in sizes)
        if needed > self.workspace.num_free:
            return None
        owner = request.seq_id
        held = [self.workspace.allocate(owner, size) for size in sizes]
        blocks = [b for b in held if b is not None]
        position = 0
        segments = []
        for segment in request.reused:
            self.runner.move_segment(segment, position)
            segments.append(segment)
            position += segment.num_tokens
        for spec, block in zip(request.new, blocks[:-1], strict=True):
            segments.append(Segment(spec.kind, block, position, spec.page_no))
            position += block.num_tokens
        return Sequence(
            owner,
            segments,
            blocks[-1],
            self.window,
            request.guard,
            request.max_new_tokens,
            next_position=position,
        )

    def _feed(self, sequence: Sequence, ids: list[int]) -> torch.Tensor:
        """Teacher-force ``ids`` as the sequence's first outputs: the guard starts where
        generating them would have left it (sections open, ids in its n-gram history)."""
        for token in ids:
            sequence.guard.observe(token)
        sequence.generated += ids
        sequence.wanted += ids
        return self.runner.feed_generated(sequence, ids)

    def _sample(self, sequence: Sequence, request: DecodeRequest, logits: torch.Tensor) -> None:
        self._sample_all([(sequence, request)], logits[None])

    def _sample_all(
        self, batch: list[tuple[Sequence, DecodeRequest]], logits: torch.Tensor
    ) -> None:
        """Greedy for the whole batch with one device sync: the guard's bans and forced tokens
        applied, and the model's own choice kept to spot loops."""
        wanted = greedy(logits)
        banned_rows, banned_ids = [], []
        for b, (sequence, request) in enumerate(batch):
            banned = sequence.guard.banned() | (
                {sequence.guard.eos_id} if request.ignore_eos else set()
            )
            banned_rows += [b] * len(banned)
            banned_ids += list(banned)
        chosen = wanted
        if banned_ids:
            masked = logits.clone()
            masked[banned_rows, banned_ids] = float("-inf")
            chosen = greedy(masked)
        picks = torch.stack([wanted, chosen]).tolist()
        for b, (sequence, request) in enumerate(batch):
            guard = sequence.guard
            forced = None if request.ignore_eos else guard.forced_token()
            token = forced if forced is not None else picks[1][b]
            guard.observe(token, wanted=picks[0][b])
            sequence.generated.append(token)
            sequence.wanted.append(picks[0][b])

    def abort_all(self) -> None:
        """Drop every request after a failed step; reused segments stay with their document."""
        for sequence, request in self.running:
            for segment in sequence.segments[len(request.reused) :]:
                self.workspace.free(segment.blocks)
            self.workspace.free(sequence.ring)
        self.running.clear()
        self.waiting.clear()

    def _retire(self) -> list[Finished]:
        finished, still = [], []
        for sequence, request in self.running:
            if not sequence.finished:
                still.append((sequence, request))
                continue
            keep = request.keep_pages  # a next group reuses these pages, and the BOS with them
            kept = [
                s
                for s in sequence.segments
                if keep and (s.kind == "bos" or (s.kind == "page" and s.page_no in keep))
            ]
            for segment in sequence.segments:
                if all(segment is not k for k in kept):
                    self.workspace.free(segment.blocks)
            self.workspace.free(sequence.ring)
            finished.append(Finished(sequence, kept))
        self.running = still
        return finished


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(-1)`` (the first of equal maxima), in two passes: on the GPU, torch's
    reduction of one 129k-wide row runs on a few blocks (27 µs a call on the H200, two calls a
    step); the maxima of 128 chunks, then the first chunk holding the largest, take ~10."""
    rows, vocab = logits.shape
    chunks = 128
    if vocab % chunks:
        return logits.argmax(-1)
    values, index = logits.view(rows, chunks, vocab // chunks).max(-1)  # (B, chunks)
    best = values.argmax(-1)
    return best * (vocab // chunks) + index.gather(1, best[:, None])[:, 0]


def free_segments(workspace: VisualKVWorkspace, segments: list[Segment]) -> None:
    """Give back what a document kept once it has no next group."""
    for segment in segments:
        workspace.free(segment.blocks)


__all__ = [
    "DecodeRequest",
    "Finished",
    "NewSegment",
    "Scheduler",
    "WorkspaceBlocks",
    "free_segments",
]
