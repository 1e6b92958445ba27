"""Our decoding loop over the native Unlimited-OCR decoder, owning its KV memory.

The KV of every sequence lives in one pool per GPU (``k_pool``/``v_pool``, rows handed out in
blocks by the VisualKVWorkspace). A sequence's rows are its prefix segments (BOS, pages, prompt)
plus a ring of ``window`` slots for generated tokens: keys are stored after RoPE at their true
positions, so attention needs no mask beyond "which rows are valid" (docs/model.md, "R-SWA").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog
import torch
import torch.nn.functional as F

from ocr_worker.engines.unlimited_ocr.step.batch_rows import BatchRows
from ocr_worker.engines.unlimited_ocr.step.cuda_graphs import CudaGraphSteps
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA, DecodeRule
from ocr_worker.engines.unlimited_ocr.step.prefill_part import PrefillPart, PrefillPass
from ocr_worker.engines.unlimited_ocr.step.sampling import on_device
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment, Sequence

if TYPE_CHECKING:
    from ocr_worker.engines.unlimited_ocr.step.fused_step import FusedStep

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _HostPart:
    """A sequence's PrefillPart with its indices still on the host, and the pool rows and
    positions of its new tokens."""

    start: int
    end: int
    rows: np.ndarray
    past: int
    written: np.ndarray
    positions: np.ndarray


class ModelRunner:
    def __init__(
        self,
        model: Any,  # UnlimitedOcrForConditionalGeneration (transformers' module types are loose)
        *,
        num_blocks: int,
        block_size: int,
        device: torch.device,
        dtype: torch.dtype,
        rule: DecodeRule = R_SWA,
        cuda_graphs: bool = False,
        fused_kernels: bool = False,
    ) -> None:
        text = model.model.language_model
        config = text.config
        self.embed: Any = text.embed_tokens
        self.layers: Any = text.layers
        self.norm: Any = text.norm
        self.lm_head: Any = model.lm_head
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.max_positions: int = config.max_position_embeddings  # 32,768: groups stay in it
        self.inv_freq = text.rotary_emb.inv_freq.to(device=device, dtype=torch.float32)
        self.block_size, self.device, self.dtype = block_size, device, dtype
        self.rule = rule  # which prefix rows each step reads (decode_rule.py)
        # One spare block past the workspace's: padding rows of graphed steps point there.
        self.scratch_row = num_blocks * block_size
        shape = (len(self.layers), (num_blocks + 1) * block_size, self.num_heads, self.head_dim)
        self.k_pool = torch.zeros(shape, device=device, dtype=dtype)  # (L, rows, H, D)
        self.v_pool = torch.zeros(shape, device=device, dtype=dtype)
        self.prefill_rows_computed = 0  # prefill work, counted for tests and benchmarks
        self._batch_cache: tuple[tuple[tuple[int, int], ...], BatchRows] | None = None
        self.graphs = CudaGraphSteps(self) if cuda_graphs and device.type == "cuda" else None
        # Our Triton kernels for the decode step (fused_step.py); Triton needs the GPU, or its
        # interpreter (TRITON_INTERPRET=1), which the tests use on the CPU.
        self.fused: FusedStep | None = None
        if fused_kernels:
            try:
                from ocr_worker.engines.unlimited_ocr.step.fused_step import FusedStep
                from ocr_worker.engines.unlimited_ocr.step.step_inputs import rotary_table
            except ImportError as error:  # no Triton in this image: the torch ops still work
                log.warning("fused_kernels.unavailable", error=str(error))
            else:
                table = rotary_table(self.rotary, self.max_positions, device)
                self.fused = FusedStep(self.embed, self.layers, self.norm, self.lm_head, table)

    # -- rows and rotary --------------------------------------------------------------------

    # Row indices are built on the host and copied once, through pinned memory: a
    # ``torch.tensor(..., device=cuda)`` per segment copies from pageable memory, which waits
    # for the step in flight, ~1,300 times for a batch of 128 sequences.

    def rows(self, blocks: WorkspaceBlocks, count: int | None = None) -> torch.Tensor:
        return self.to_device(self.host_rows(blocks, count))

    def rows_of(self, many: list[WorkspaceBlocks]) -> torch.Tensor:
        """The rows of several block lists, one after the other, in one copy."""
        return self.to_device(np.concatenate([self.host_rows(blocks) for blocks in many]))

    def host_rows(self, blocks: WorkspaceBlocks, count: int | None = None) -> np.ndarray:
        """On the host; shared with later callers (read it, never write to it)."""
        count = blocks.num_tokens if count is None else count
        return _block_rows(blocks.block_ids, self.block_size, count)

    def to_device(self, host: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(host)
        if self.device.type != "cuda":
            return tensor.to(self.device, copy=True)  # never the cached array itself
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq  # (N, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (N, D)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x: (..., N, H, D); cos/sin: (N, D). The rotate-half RoPE of the model."""
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos[:, None, :] + rotated * sin[:, None, :]

    def move_segment(self, segment: Segment, first_position: int) -> None:
        """Re-place a reused segment at new positions: RoPE-rotate by the shift, no recompute."""
        shift = first_position - segment.first_position
        if shift:
            rows = self.rows(segment.blocks)
            cos, sin = self.rotary(torch.full((rows.numel(),), shift, device=self.device))
            # Every layer's keys in one gather and one scatter: a loop over the layers took 120
            # launches a reused page, for each of a round's 128 groups.
            self.k_pool[:, rows] = self.rotate(self.k_pool[:, rows], cos, sin)
            segment.first_position = first_position
        self._batch_cache = None

    @torch.no_grad()
    def prefill(self, sequence: Sequence, new: list[Segment], embeds: torch.Tensor) -> torch.Tensor:
        """Compute the KV of the ``new`` segments (embeds: (T, hidden)) attending to the
        sequence's other, already filled segments; returns the logits of the last row (V,)."""
        return self.prefill_many([(sequence, new, [embeds])])[0]

    @torch.no_grad()
    def prefill_many(
        self, items: list[tuple[Sequence, list[Segment], list[torch.Tensor]]]
    ) -> torch.Tensor:
        """Several sequences' prefills in one pass: their new rows go through each layer's
        projections and MLP together, and each attends only to its own rows. A group's prefill
        waits on the host's launches (42 ms for an 8-page group on the H200, a third of it GPU
        work), so one pass for the groups that arrive together (a vision call's) costs little
        more than one did. ``items``: each sequence, its new segments and their embeddings
        (joined here once, for the whole pass). Returns each sequence's last-row logits,
        (len(items), V)."""
        hosted, start = [], 0
        for sequence, new, segments in items:
            count = sum(e.shape[0] for e in segments)
            hosted.append(self._prefill_part(sequence, new, start, count))
            start += count
        # Every index of the pass in one copy: new rows, their positions, each part's rows,
        # each part's last row (whose logits come back). None is copied from pageable memory:
        # such a copy waits for the card, and a CUDA graph cannot hold it.
        indices = [p.written for p in hosted] + [p.positions for p in hosted]
        lasts = np.array([p.end - 1 for p in hosted], dtype=np.int64)
        on_card = self.to_device(np.concatenate(indices + [p.rows for p in hosted] + [lasts]))
        written, placed = on_card[:start], on_card[start : 2 * start]
        parts, at = [], 2 * start
        for part in hosted:
            size = part.rows.size
            parts.append(PrefillPart(part.start, part.end, on_card[at : at + size], part.past))
            at += size
        queries = [p.end - p.start for p in hosted]
        keys = [p.rows.size for p in hosted]
        bounds = self.to_device(np.cumsum([[0] + queries, [0] + keys], axis=1, dtype=np.int32))
        packed = PrefillPass(
            parts,
            on_card[2 * start : at],
            (bounds[0], bounds[1]),
            (max(queries), max(keys)),
            on_card[at:],
        )
        embeds = torch.cat([e for _, _, segments in items for e in segments])  # (T, hidden)
        cos, sin = self.rotary(placed)
        self.prefill_rows_computed += start
        self._batch_cache = None
        if self.fused is not None:
            try:
                return self.fused.prefill(
                    embeds.to(self.dtype), cos, sin, self.k_pool, self.v_pool, written, packed
                )
            except torch.cuda.OutOfMemoryError:  # the kernels are not at fault: keep them
                raise
            except Exception as error:  # a Triton build or launch failure: the torch ops below
                log.warning("fused_kernels.disabled", error=str(error)[:300])
                self.fused = None
        x = embeds.to(self.dtype)[None]  # (1, T, hidden)
        for index, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x[0], cos, sin)  # (T, H, D) each
            self.k_pool[index, written], self.v_pool[index, written] = k, v
            out = packed.attend(q, self.k_pool[index], self.v_pool[index])  # (T, H, D)
            x = self._finish_layer(layer, x, out.reshape(1, start, -1))
        return self._logits(x[0].index_select(0, packed.last_rows))

    def _prefill_part(
        self, sequence: Sequence, new: list[Segment], start: int, count: int
    ) -> _HostPart:
        """The sequence's part of a batched prefill, on the host: the rows it reads, the pool
        rows its new tokens fill, and their positions."""
        past = [s for s in sequence.segments if all(s is not n for n in new)]
        written = np.concatenate([self.host_rows(s.blocks) for s in new])
        positions = np.concatenate(
            [np.arange(s.first_position, s.first_position + s.num_tokens) for s in new]
        )
        if not past:  # causal over its own rows
            return _HostPart(start, start + count, written, 0, written, positions)
        past_rows = np.concatenate([self.host_rows(s.blocks) for s in past])
        rows = np.concatenate([past_rows, written])  # new rows see every past row, and each other
        return _HostPart(start, start + count, rows, past_rows.size, written, positions)

    @torch.no_grad()
    def feed_generated(self, sequence: Sequence, ids: list[int]) -> torch.Tensor:
        """Teacher-force ``ids`` as the sequence's first generated tokens, in one pass, right
        after its prefill: each sees the whole prefix and the ``window`` most recent of them,
        itself included (R-SWA, as decoding them one by one would: another decode rule is
        not applied here), at positions after the prefix; their KV lands in the ring slots decode
        would have written, so the ring ends holding the last ``window``. Returns the logits
        after the last id (V,)."""
        count, window = len(ids), sequence.window
        prefix_rows = self.rows_of([s.blocks for s in sequence.segments])
        first = sequence.next_position
        cos, sin = self.rotary(torch.arange(first, first + count, device=self.device))
        index = torch.arange(count, device=self.device)
        age = index[:, None] - index[None, :]  # (T, T): how far back each fed id is
        mask = torch.cat(
            [
                torch.ones(count, prefix_rows.numel(), dtype=torch.bool, device=self.device),
                (age >= 0) & (age < window),
            ],
            dim=1,
        )  # (T, P + T)
        kept = index[-window:]  # earlier ids' slots are overwritten by later ones
        ring_rows = self.rows(sequence.ring, window)[kept % window]
        fed = on_device(ids, self.device)  # pinned: a pageable copy waits for the card
        x = self.embed(fed).to(self.dtype)[None]  # (1, T, hidden)
        for layer_index, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x[0], cos, sin)  # (T, H, D) each
            keys = torch.cat([self.k_pool[layer_index, prefix_rows], k])
            values = torch.cat([self.v_pool[layer_index, prefix_rows], v])
            self.k_pool[layer_index, ring_rows] = k[kept]
            self.v_pool[layer_index, ring_rows] = v[kept]
            out = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None],
                keys.transpose(0, 1)[None],
                values.transpose(0, 1)[None],
                attn_mask=mask,
            )  # (1, H, T, D)
            x = self._finish_layer(layer, x, out.transpose(1, 2).reshape(1, count, -1))
        sequence.next_position += count
        return self._logits(x[0, -1:])[0]

    # -- decode -----------------------------------------------------------------------------

    @torch.no_grad()
    def decode(
        self, sequences: list[Sequence], tokens: tuple[torch.Tensor, list[int]] | None = None
    ) -> torch.Tensor:
        """Feed each sequence's last sampled token; returns next-token logits (B, V).

        ``tokens``: the tokens to feed, already on the device (the previous step's choice,
        not yet read by the host), and each sequence's generated count with them."""
        batch = self._batch(sequences)
        if tokens is None:
            fed = on_device([s.generated[-1] for s in sequences], self.device)
            counts = [len(s.generated) for s in sequences]
        else:
            fed, counts = tokens
        numbers = [[s.next_position for s in sequences], counts]  # positions, generated
        logits = None
        if self.graphs is not None and not batch.scored:
            try:
                logits = self.graphs.run(batch, fed, numbers)
            except RuntimeError as error:  # e.g. a kernel that syncs with the host (fp32 MoE)
                log.warning("cuda_graphs.disabled", error=str(error)[:300])
                self.graphs = None
        if logits is None:
            positions, generated = on_device(numbers, self.device)
            logits = self.step(fed, positions, generated, batch, sequences)
        for sequence in sequences:
            sequence.next_position += 1
        return logits

    def step(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        generated: torch.Tensor,
        batch: BatchRows,
        sequences: list[Sequence] | None = None,
    ) -> torch.Tensor:
        """One decode step as pure tensor work (CUDA-graph capturable unless ``batch.scored``).

        tokens/positions/generated: (B,); the ring slot written is (generated - 1) % window."""
        if self.fused is not None and not batch.scored:
            try:
                return self.fused(tokens, positions, generated, batch, self.k_pool, self.v_pool)
            except Exception as error:  # a Triton build or launch failure: torch's ops still work
                if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                    raise
                log.warning("fused_kernels.disabled", error=str(error)[:300])
                self.fused = None  # the torch ops below rewrite whatever rows it wrote
        count = tokens.shape[0]
        slots = (generated - 1) % batch.window
        write_rows = batch.ring_rows[torch.arange(count, device=tokens.device), slots]
        # Ring slots hold the min(n, window) most recent generated tokens, this one included.
        valid = batch.prefix_valid | (
            (batch.ring_column >= 0)
            & (batch.ring_column < generated.clamp(max=batch.window)[:, None])
        )  # (B, R)
        cos, sin = self.rotary(positions)
        x = self.embed(tokens).to(self.dtype)[:, None]  # (B, 1, hidden)
        for index, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x[:, 0], cos, sin)  # (B, H, D)
            self.k_pool[index, write_rows], self.v_pool[index, write_rows] = k, v
            rows, visible = batch.rows, valid
            if batch.scored:  # a candidate set above the budget: choose blocks per layer
                assert sequences is not None
                rows, visible = self.rule.select(self, index, q, rows, valid, sequences)
            keys = self.k_pool[index][rows].transpose(1, 2)  # (B, H, R, D)
            values = self.v_pool[index][rows].transpose(1, 2)
            out = F.scaled_dot_product_attention(
                q[:, :, None], keys, values, attn_mask=visible[:, None, None]
            )  # (B, H, 1, D)
            x = self._finish_layer(layer, x, out.reshape(count, 1, -1))
        return self._logits(x[:, 0])

    def _batch(self, sequences: list[Sequence]) -> BatchRows:
        """The rows each sequence reads, rebuilt only when the batch or a page changes."""
        follows = self.rule.follows_page
        key = tuple((id(s), s.guard.current_page if follows else 0) for s in sequences)
        cached = self._batch_cache  # read once: overlap_bench prefills from another thread
        if cached is None or cached[0] != key:
            cached = self._batch_cache = (key, self._build_batch(sequences))
        return cached[1]

    def _build_batch(self, sequences: list[Sequence]) -> BatchRows:
        """Built on the host, copied in one go (see ``rows``)."""
        window = sequences[0].window
        prefixes, scored = [], False
        for s in sequences:
            plan = self.rule.plan(s)
            scored = scored or (plan is not None and plan.scored)
            blocks = [seg.blocks for seg in s.segments] if plan is None else plan.blocks
            prefixes.append(np.concatenate([self.host_rows(b) for b in blocks]))
        width = max(p.size for p in prefixes) + window
        # (rows, prefix valid, ring column) for each sequence, prefix part first, then its ring
        table = np.zeros((3, len(sequences), width), dtype=np.int64)
        table[2] = -1
        ring_rows = np.stack([self.host_rows(s.ring, window) for s in sequences])  # (B, W)
        for b, prefix in enumerate(prefixes):
            n = prefix.size
            table[0, b, :n], table[1, b, :n] = prefix, 1
            table[0, b, n : n + window] = ring_rows[b]
            table[2, b, n : n + window] = np.arange(window)
        on_card = self.to_device(table)
        rings = self.to_device(ring_rows)
        return BatchRows(on_card[0], on_card[1].bool(), on_card[2], rings, window, scored)

    # -- layer pieces (the native modules' weights) ----------------------------------------

    def _qkv(
        self, layer: Any, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h: (N, hidden) -> q, k (rotated), v: (N, H, D)."""
        attn = layer.self_attn
        h = layer.input_layernorm(h)
        shape = (h.shape[0], self.num_heads, self.head_dim)
        q = attn.q_proj(h).view(shape)
        k = attn.k_proj(h).view(shape)
        v = attn.v_proj(h).view(shape)
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin), v

    def _finish_layer(self, layer: Any, x: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        x = x + layer.self_attn.o_proj(attn_out)
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(x)).float()


@functools.lru_cache(maxsize=16384)
def _block_rows(block_ids: tuple[int, ...], block_size: int, count: int) -> np.ndarray:
    """Cached: a batch is rebuilt whenever a sequence joins or leaves, from the same segments
    (~1,300 at 128 sequences). In numpy: a batch of 128 sequences is built in 1.7 ms, where
    torch's small CPU ops took 56."""
    ids = np.asarray(block_ids, dtype=np.int64)
    return (ids[:, None] * block_size + np.arange(block_size)).reshape(-1)[:count]
