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

import structlog
import torch

from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sampling import Chosen, choose, on_device
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import (
    VisualKVWorkspace,
    WorkspaceBlocks,
)
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment, Sequence
from ocr_worker.stage_clock import clock

log = structlog.get_logger(__name__)


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
    # An interactive job's group: it waits for a slot ahead of every backlog group.
    interactive: bool = False


@dataclass
class Finished:
    sequence: Sequence
    kept: list[Segment]


@dataclass
class Launched:
    """A decode step's tokens, or a prefill pass's first tokens, chosen on the device and not
    yet read by the host."""

    batch: list[tuple[Sequence, DecodeRequest]]
    live: list[bool]  # rows whose sequence was still unfinished when the choice was queued
    chosen: Chosen

    def unread(self) -> set[int]:
        """``id()`` of each sequence with a token here that the host has not read yet."""
        return {id(s) for (s, _), live in zip(self.batch, self.live, strict=True) if live}


@dataclass
class Scheduler:
    runner: ModelRunner
    workspace: VisualKVWorkspace
    max_concurrency: int
    window: int
    waiting: deque[DecodeRequest] = field(default_factory=deque)
    running: list[tuple[Sequence, DecodeRequest]] = field(default_factory=list)
    steps: int = 0  # decode steps run, for benchmarks
    # Launch each step before reading the previous one's tokens (see ``step``). Off: every
    # step's tokens are read before the next is launched.
    overlap: bool = True
    # Read each prefill pass's first tokens before the next step is launched, as before
    # 2026-12-06 (tiles_bench's base); else they are read as that step runs (see ``_admit``).
    first_tokens_at_once: bool = False
    # The last step's choice, not yet read by the host: its rows and tokens on the device.
    _launched: Launched | None = field(default=None, init=False)
    # Frees some cached blocks (kept boundary pages) and says whether it did; a cache must never
    # keep a waiting request out of a pool that running sequences do not fill.
    reclaim: Callable[[], bool] | None = None
    # Rows prefilled in one pass (unlimited_ocr.prefill_max_rows): the pass's activations grow
    # with them (the MoE's fp32 pairs, six a row), the launches do not.
    prefill_max_rows: int = 16384
    # The token choice in choice_kernels while the runner's step runs in our kernels; torch's
    # ops once a launch of them fails (as the runner falls back for its step).
    _choice_kernels: bool = field(default=True, init=False)

    def submit(self, request: DecodeRequest) -> None:
        """Queue a request; one that could never run is refused here, alone."""
        prefix = sum(s.num_tokens for s in request.reused) + _new_rows(request)
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
        if request.interactive:  # after the interactive groups already waiting, before the rest
            ahead = sum(1 for waiting in self.waiting if waiting.interactive)
            self.waiting.insert(ahead, request)
        else:
            self.waiting.append(request)

    def step(self) -> list[Finished]:
        """Admit what fits, run one decode step for every running sequence, retire the done.

        Overlapped: the step is launched on the tokens the previous step chose on the device;
        the host reads those tokens and runs the guard while the GPU computes this step, then
        queues this step's choice (the guard's bans and forcing applied on the device). New
        sequences' first tokens, chosen by their prefill pass, are fed from the device alike.
        A sequence the guard finishes rides along in the step already launched; its row is
        dropped. SR-SWA's block choice follows the page the guard has seen, so with such a rule
        every step reads its tokens before the next is launched."""
        # unread choices on the device: the last step's, then the passes' admitted since (the
        # order of self.running, so an unchanged batch feeds them with no gather)
        pending = [self._launched] if self._launched is not None else []
        pending += self._admit()
        self._launched = None
        unread = set().union(*(earlier.unread() for earlier in pending))
        # A sequence whose unread token is its last by budget is not stepped again.
        active = [
            (s, r)
            for s, r in self.running
            if not s.finished and len(s.generated) + (id(s) in unread) < s.max_new_tokens
        ]
        if active:
            self.steps += 1
            with clock.timed("decode"):
                sequences = [s for s, _ in active]
                fed = self._fed_tokens(active, pending)
                logits = self.runner.decode(sequences, tokens=fed)
                self._observe_all(pending)  # the GPU computes this step meanwhile
                chosen = self._choose(active, logits)
                if not self._overlapped() and chosen is not None:
                    self._observe(chosen)
                else:
                    self._launched = chosen
            # Rows whose sequence ended on the token just read rode along and write nothing.
            clock.add("tokens", sum(chosen.live) if chosen is not None else 0)
            clock.add("steps", 1)  # with step_rows: how full the steps ran, in the service too
            clock.add("step_rows", len(active))
        else:
            self._observe_all(pending)
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

    def _admit(self) -> list[Launched]:
        """Every waiting request that fits, prefilled together (up to ``prefill_max_rows`` rows
        a pass): the groups of one vision call arrive together. Returns the passes' first
        tokens, unread. Overlapped, they stay on the device: the next step feeds them and the
        host reads them while it runs, as a step's, so the card need not drain while the host
        reads them and rebuilds the batch (the idle gaps over 1 ms, 0.16 ms a step at 128
        documents on an H100, are where that wait would show; bench/RESULTS.md, "GPU engine:
        kernels"). Else (SR-SWA
        too) they are read here, once every pass is launched."""
        # a pass that fails leaves every request to abort_all
        passes = self._admit_passes()
        if self._overlapped() and not self.first_tokens_at_once:
            return passes
        self._observe_all(passes)
        return []

    def _overlapped(self) -> bool:
        """Whether a step is launched before its predecessor's tokens are read: SR-SWA reads
        them first, its blocks following the page the guard has seen."""
        return self.overlap and not self.runner.rule.follows_page

    def _admit_passes(self) -> list[Launched]:
        """Prefill what fits, pass by pass; each pass's first tokens are chosen, not read."""
        launched: list[Launched] = []
        while self.waiting and len(self.running) < self.max_concurrency:
            admitted: list[tuple[Sequence, DecodeRequest]] = []
            rows = 0
            while (
                self.waiting
                and len(self.running) + len(admitted) < self.max_concurrency
                and (not admitted or rows + _new_rows(self.waiting[0]) <= self.prefill_max_rows)
            ):
                sequence = self._allocate(self.waiting[0])
                while sequence is None and self.reclaim is not None and self.reclaim():
                    sequence = self._allocate(self.waiting[0])
                if sequence is None:
                    break  # no room: the rest wait for blocks
                admitted.append((sequence, self.waiting.popleft()))
                rows += _new_rows(admitted[-1][1])
            if not admitted:
                break
            launched.append(self._prefill(admitted))
        return launched

    def _prefill(self, admitted: list[tuple[Sequence, DecodeRequest]]) -> Launched:
        """Prefill the admitted requests in one pass and queue the choice of their first
        tokens (read by ``_admit``, or with the next step)."""
        self.running += admitted  # running before the pass: if it fails, abort_all frees them
        with clock.timed("prefill"):
            logits = self.runner.prefill_many(
                [(s, s.segments[len(r.reused) :], [n.embeds for n in r.new]) for s, r in admitted]
            )
            firsts = [
                self._feed(sequence, list(request.already_generated))
                if request.already_generated
                else first
                for (sequence, request), first in zip(admitted, logits, strict=True)
            ]
            first_tokens = self._choose(admitted, torch.stack(firsts))
        assert first_tokens is not None  # no guard has finished a sequence not yet begun
        clock.add("tokens", len(admitted))
        clock.add("prefill_passes", 1)
        return first_tokens

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

    def _fed_tokens(
        self, active: list[tuple[Sequence, DecodeRequest]], pending: list[Launched]
    ) -> tuple[torch.Tensor, list[int]] | None:
        """What each active sequence feeds this step, and how many tokens it will then have
        generated: the device's choice for rows of a launched step or pass, whose tokens the
        host has not read yet; the host's last token for the others."""
        if not pending:
            return None
        row_of: dict[int, int] = {}
        offset = 0
        for earlier in pending:
            row_of |= {id(s): offset + b for b, (s, _) in enumerate(earlier.batch)}
            offset += len(earlier.batch)
        assert len(row_of) == offset, "a sequence in two unread choices"
        rows = [row_of.get(id(s), -1) for s, _ in active]
        counts = [len(s.generated) + (row >= 0) for (s, _), row in zip(active, rows, strict=True)]
        tokens = (
            pending[0].chosen.tokens
            if len(pending) == 1
            else torch.cat([earlier.chosen.tokens for earlier in pending])
        )
        if rows == list(range(offset)):  # the same batch: no gather
            return tokens, counts
        # the host's last token where the device has none (a new sequence may have none yet)
        last = [s.generated[-1] if row < 0 else 0 for (s, _), row in zip(active, rows, strict=True)]
        known = on_device(last, tokens.device)
        index = on_device(rows, tokens.device)
        return torch.where(index >= 0, tokens[index.clamp(min=0)], known), counts

    def _choose(
        self, batch: list[tuple[Sequence, DecodeRequest]], logits: torch.Tensor
    ) -> Launched | None:
        """Queue the choice of each row's next token on the device: the guard's bans and
        forced tokens applied, the model's own choice kept to spot loops. Rows whose sequence
        the guard has finished meanwhile are chosen for nothing."""
        live = [not s.finished for s, _ in batch]
        if not any(live):
            return None
        banned, forced = [], []
        for (sequence, request), alive in zip(batch, live, strict=True):
            guard = sequence.guard
            ban = guard.banned() | ({guard.eos_id} if request.ignore_eos else set())
            banned.append(ban if alive else set())
            imposed = guard.forced_token() if alive and not request.ignore_eos else None
            forced.append(imposed)
        if self._choice_kernels and self.runner.fused is not None:
            try:
                return Launched(batch, live, choose(logits, banned, forced, kernels=True))
            except Exception as error:  # a Triton build or launch failure: torch's ops work
                log.warning("choice_kernels.disabled", error=str(error)[:300])
                self._choice_kernels = False
        return Launched(batch, live, choose(logits, banned, forced, kernels=False))

    def _observe_all(self, pending: list[Launched]) -> None:
        for launched in pending:
            self._observe(launched)

    def _observe(self, launched: Launched) -> None:
        """Read a step's tokens (waiting for the copy if it is still on its way) and give
        them to each sequence's guard."""
        wanted, chosen = launched.chosen.read()
        logprobs = launched.chosen.read_logprobs()
        for b, ((sequence, _), alive) in enumerate(zip(launched.batch, launched.live, strict=True)):
            if alive:
                sequence.guard.observe(chosen[b], wanted=wanted[b], logprob=logprobs[b])
                sequence.generated.append(chosen[b])
                sequence.wanted.append(wanted[b])

    def abort_all(self) -> None:
        """Drop every request after a failed step; reused segments stay with their document."""
        for sequence, request in self.running:
            for segment in sequence.segments[len(request.reused) :]:
                self.workspace.free(segment.blocks)
            self.workspace.free(sequence.ring)
        self.running.clear()
        self.waiting.clear()
        self._launched = None

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


def _new_rows(request: DecodeRequest) -> int:
    return sum(n.embeds.shape[0] for n in request.new)


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
