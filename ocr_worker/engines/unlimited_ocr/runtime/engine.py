"""UnlimitedOcrEngine: the OcrEngine the GPU workers run.

A page group becomes one decoding sequence: ``[BOS] + visual tokens of its pages + prompt``.
The boundary pages' KV stays in the workspace for the document's next group and is reused,
not recomputed (unless that group lands on another worker, which then recomputes it, or the
pool needed those blocks first: see kept_pages.py).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import structlog
import torch

from ocr_worker.engines.base import OcrEngine, PageGroupInput, PageImage
from ocr_worker.engines.unlimited_ocr.model.checkpoint import load_model
from ocr_worker.engines.unlimited_ocr.model.fast_tower import encode_pages, use_fast_tower
from ocr_worker.engines.unlimited_ocr.model.manifest import MANIFEST_NAME, verify_manifest
from ocr_worker.engines.unlimited_ocr.model.preprocess import gundam_views, page_tensor
from ocr_worker.engines.unlimited_ocr.output.page_guard import (
    PAGE_MARKER,
    PREAMBLE_BUDGET,
    PageGuard,
)
from ocr_worker.engines.unlimited_ocr.output.sections import kept_section_ids, page_results
from ocr_worker.engines.unlimited_ocr.runtime.decode_loop import DecodeLoop
from ocr_worker.engines.unlimited_ocr.runtime.kept_pages import KeptPages, KeptPagesCache
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import (
    DecodeRequest,
    Finished,
    NewSegment,
    Scheduler,
    free_segments,
)
from ocr_worker.engines.unlimited_ocr.runtime.vision_batcher import VisionBatcher
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA, DecodeRule
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import VisualKVWorkspace
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment
from ocr_worker.stage_clock import clock
from uocr_core.contracts import PageResult
from uocr_core.settings import Settings, UnlimitedOcrSettings

log = structlog.get_logger(__name__)
SINGLE_PAGE_PROMPT = "document parsing."  # the official prompts, after the image tokens
MULTI_PAGE_PROMPT = "Multi page parsing."


class UnlimitedOcrEngine(OcrEngine):
    name = "unlimited_ocr"
    uses_context_pages = True

    def __init__(
        self,
        model,
        tokenizer,
        settings: Settings,
        device: torch.device,  # type: ignore[no-untyped-def]
        dtype: torch.dtype,
    ) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.options: UnlimitedOcrSettings = settings.unlimited_ocr
        # The vision tower on a stream of its own, so it overlaps the decode loop's steps.
        self.vision = VisionBatcher(
            self._encode_pages,
            # transformers' own SAM attention holds a (heads, 4096, 4096) bias per page and
            # layer (400 MB): unfused, one group a call, as its memory was planned.
            max_pages=self.options.vision_batch_pages if self.options.fused_sam_rel_pos else 1,
            stream=torch.cuda.Stream(device) if device.type == "cuda" else None,
        )
        # Groups holding their pixels on the card while they wait for the tower: two calls'
        # worth (unbounded, 128 waiting groups would hold ~6 GB beside the KV workspace).
        group = settings.page_group_size + settings.page_group_overlap
        self._vision_slots = threading.BoundedSemaphore(max(2, 2 * self.vision.max_pages // group))
        self.overlap = settings.page_group_overlap
        text = model.config.text_config
        self.window, self.eos_id, self.bos_id = (
            text.sliding_window,
            text.eos_token_id,
            text.bos_token_id,
        )
        self.image_size = model.config.vision_config.sam_config.image_size
        if self.options.fused_sam_rel_pos:  # SAM's attention folded, and the tower's other
            use_fast_tower(model)  # steps done without copies (fast_tower.py)
        bytes_per_token = (
            text.num_hidden_layers
            * 2
            * text.num_key_value_heads
            * text.head_dim
            * (torch.finfo(dtype).bits // 8)
        )
        workspace = VisualKVWorkspace.from_bytes(
            workspace_bytes=int(settings.visual_cache_workspace_gb * 2**30),
            bytes_per_token=bytes_per_token,
            block_size=self.options.block_size,
        )
        rule = _decode_rule(self.options, workspace.block_size)
        runner = ModelRunner(
            model,
            num_blocks=workspace.num_blocks,
            block_size=workspace.block_size,
            device=device,
            dtype=dtype,
            rule=rule,
            cuda_graphs=self.options.cuda_graphs,
            fused_kernels=self.options.fused_kernels and device.type == "cuda",
        )
        log.info(
            "engine.workspace_initialised",
            blocks=workspace.num_blocks,
            block_size=workspace.block_size,
            gb=settings.visual_cache_workspace_gb,
        )
        self.kept = KeptPagesCache(self.options.kept_pages_seconds)
        scheduler = Scheduler(
            runner,
            workspace,
            settings.max_concurrency,
            self.window,
            reclaim=self._reclaim_oldest,
            prefill_max_rows=self.options.prefill_max_rows,
        )
        if device.type == "cuda":  # the loop thread must get the GIL back quickly (settings.py)
            sys.setswitchinterval(self.options.gil_switch_interval_ms / 1000)
        self.loop = DecodeLoop(scheduler, on_thread=_loop_stream(device))
        self.marker_ids = tuple(tokenizer.encode(PAGE_MARKER, add_special_tokens=False).ids)
        # The text of every id, so the guard sees "<PAGE>" however the model spells it.
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        texts = tokenizer.decode_batch([[i] for i in range(size)], skip_special_tokens=False)
        self.token_texts: list[str] = texts

    @classmethod
    def from_settings(cls, settings: Settings) -> UnlimitedOcrEngine:
        from tokenizers import Tokenizer

        path = Path(str(settings.model_path))
        if (path / MANIFEST_NAME).is_file() or settings.environment == "production":
            verify_manifest(path)  # refuses a partial or corrupt download, naming the file
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype = _dtype(settings.unlimited_ocr.dtype, device)
        started = time.perf_counter()
        model = load_model(path, device=device, dtype=dtype)
        log.info(
            "engine.weights_loaded",
            path=str(path),
            device=str(device),
            dtype=str(dtype),
            seconds=round(time.perf_counter() - started, 1),
        )
        engine = cls(
            model, Tokenizer.from_file(str(path / "tokenizer.json")), settings, device, dtype
        )
        log.info("engine.ready", max_concurrency=settings.max_concurrency)
        return engine

    # -- the OcrEngine interface -------------------------------------------------------------

    def input_long_side(self, pages: int) -> int | None:
        """Pages of a group are read in base mode at ``image_size`` (1024): drawn larger they
        would only cost render CPU and upload time, and be shrunk on the card. A one-page
        document in gundam mode reads 640-pixel tiles of the page at the render dpi."""
        return None if pages == 1 and self.options.gundam else self.image_size

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        started = time.perf_counter()
        self._expire_kept()
        with self.vision.on_stream():  # pages and prompt embedded beside the decode loop
            request = self._request(group)
            self.vision.settle()  # the loop reads them on its own stream
        finished = self.loop.decode(request)
        if finished.kept:
            self._keep(group.job_id, finished, len(request.keep_pages))
        generated = finished.sequence.generated
        self.count_tokens(len(generated) - len(request.already_generated))  # those decoded
        results = self._results(group, generated, finished.sequence.guard)
        elapsed = int((time.perf_counter() - started) * 1000 / max(1, len(results)))
        for result in results:
            result.duration_ms = elapsed
        return results

    def end_document(self, job_id: str) -> None:
        self._release(self.kept.take(job_id))
        if self.device.type == "cuda":  # memory must stay flat document after document
            log.info(
                "engine.document_done",
                job_id=job_id,
                gpu_reserved_bytes=torch.cuda.memory_reserved(self.device),
                gpu_allocated_bytes=torch.cuda.memory_allocated(self.device),
            )

    def _keep(self, job_id: str, finished: Finished, pages_kept: int) -> None:
        """The boundary pages' KV, and what this group wrote for them, wait for the next group."""
        sequence = finished.sequence
        section_ids = kept_section_ids(
            sequence.generated, sequence.guard, pages_kept=pages_kept, marker_ids=self.marker_ids
        )
        self._release(self.kept.put(job_id, finished.kept, section_ids))

    def _release(self, kept: KeptPages | None) -> None:
        if kept is not None:
            self.loop.call(lambda: free_segments(self.loop.scheduler.workspace, kept.segments))

    def _expire_kept(self) -> None:
        """Boundary pages whose next group never came here (another worker took it, or the
        job died) go back to the pool after ``kept_pages_seconds``."""
        for kept in self.kept.take_expired():
            self._release(kept)

    def _reclaim_oldest(self) -> bool:
        """On the loop thread, when a waiting request lacks blocks: the oldest kept pages go
        back to the pool (their document's next group, if it comes here, recomputes them)."""
        kept = self.kept.take_oldest()
        if kept is None:
            return False
        free_segments(self.loop.scheduler.workspace, kept.segments)
        log.info("engine.kept_pages_reclaimed", job_id=kept.job_id, pages=list(kept.page_nos))
        return True

    # -- building the sequence -----------------------------------------------------------------

    def _request(self, group: PageGroupInput) -> DecodeRequest:
        kept = self.kept.take(group.job_id)
        context_nos = tuple(p.page_no for p in group.context)
        pages = len(group.context) + len(group.pages)
        keep = (
            tuple(p.page_no for p in group.pages[-self.overlap :])
            if self.overlap and not group.is_last
            else ()
        )
        # One page whose KV no later group reuses: the official single-image path (gundam).
        gundam = pages == 1 and not keep and self.options.gundam
        reused: list[Segment] = []
        new: list[NewSegment] = []
        written: tuple[int, ...] = ()  # the context pages' output, as the previous group wrote it
        if kept is not None and kept.page_nos == context_nos:
            reused = kept.segments  # BOS + the boundary pages, already in the pool
            written = kept.section_ids if self.options.reuse_boundary_section else ()
        else:
            self._release(kept)
            new.append(NewSegment("bos", self._embed([self.bos_id])))
            new += self._page_segments(group.context)
        new += self._gundam_segment(group.pages[0]) if gundam else self._page_segments(group.pages)
        prompt = SINGLE_PAGE_PROMPT if pages == 1 else MULTI_PAGE_PROMPT
        prompt_ids = self.tokenizer.encode(prompt, add_special_tokens=False).ids
        new.append(NewSegment("prompt", self._embed(prompt_ids)))
        guard = PageGuard(
            num_pages=pages,
            eos_id=self.eos_id,
            marker_ids=self.marker_ids,
            page_budget=self.options.max_tokens_per_page,
            token_text=self._token_text,
            framed=pages > 1,
            ngram_size=self.options.ngram_size,
            window=128 if pages == 1 else 1024,
        )
        guard.seed(prompt_ids)
        budget = self._new_token_budget(pages, reused, new)
        return DecodeRequest(
            f"{group.job_id}:{group.group_index}",
            reused,
            new,
            guard,
            max_new_tokens=budget,
            keep_pages=keep,
            already_generated=written if len(written) < budget else (),
            interactive=group.interactive,
        )

    def _token_text(self, token: int) -> str:
        return self.token_texts[token] if 0 <= token < len(self.token_texts) else ""

    def _new_token_budget(self, pages: int, reused: list[Segment], new: list[NewSegment]) -> int:
        """Every page's budget, capped so prefix + output stays inside the model's positions."""
        prefix = sum(s.num_tokens for s in reused) + sum(n.embeds.shape[0] for n in new)
        room = self.loop.scheduler.runner.max_positions - prefix
        per_page = self.options.max_tokens_per_page + len(self.marker_ids)
        return min(per_page * pages + PREAMBLE_BUDGET + len(self.marker_ids), room)

    @torch.no_grad()
    def _page_segments(self, pages: list[PageImage]) -> list[NewSegment]:
        if not pages:
            return []
        queued = time.perf_counter()
        with self._vision_slots:  # read with other groups' pages, in one call of the tower
            clock.add("vision_queue", time.perf_counter() - queued)  # for room on the card
            features = self.vision.features(
                torch.stack(
                    [page_tensor(p.pixels, self.image_size, self.device) for p in pages]
                ).to(self.model.dtype)  # the float32 stack is not kept
            )
        return [
            NewSegment("page", f, page_no=p.page_no) for p, f in zip(pages, features, strict=True)
        ]

    @torch.no_grad()
    def _encode_pages(self, pixels: torch.Tensor) -> torch.Tensor:
        """Base-mode pages, (pages, 3, size, size), to one feature row each."""
        if self.options.fused_sam_rel_pos:
            return encode_pages(self.model, pixels)  # (pages, 273, hidden) in one tensor
        return self.model.model.get_image_features(pixel_values=pixels).pooler_output

    @torch.no_grad()
    def _gundam_segment(self, page: PageImage) -> list[NewSegment]:
        views = gundam_views(
            page.pixels, self.image_size, self.options.tile_size, device=self.device
        )
        dtype = self.model.dtype

        def encode() -> torch.Tensor:
            return self.model.model.get_image_features(
                pixel_values=views.global_view[None].to(dtype),
                pixel_values_local=None if views.tiles is None else views.tiles.to(dtype),
                num_local_patches=[0 if views.tiles is None else views.tiles.shape[0]],
                patches_grid=[[views.columns, views.rows]],
            ).pooler_output  # tiles row by row (each row + newline), the global view, separator

        features = self.vision.alone(encode)
        return [NewSegment("page", features[0], page_no=page.page_no)]

    def _embed(self, ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return self.model.model.language_model.embed_tokens(
                torch.tensor(ids, device=self.device)
            )

    # -- reading the output --------------------------------------------------------------------

    def _results(self, group: PageGroupInput, ids: list[int], guard: PageGuard) -> list[PageResult]:
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return page_results(group, text, guard, engine=self.name)


def _decode_rule(options: UnlimitedOcrSettings, block_size: int) -> DecodeRule:
    """R-SWA, as v1 was trained; SR-SWA's block selector when the setting asks for it: an
    opt-in, training-free approximation on v1 weights, for speed."""
    if not options.sr_swa:
        return R_SWA
    settings = SrSwaSettings(
        max_blocks=options.sr_swa_max_blocks, page_gate=options.sr_swa_page_gate
    )
    return BlockSelector(settings, block_size=block_size)


def _dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def _loop_stream(device: torch.device) -> Callable[[], AbstractContextManager[Any]]:
    """The decode loop's steps on a stream of higher priority than the tower's: the GPU's block
    scheduler then starts a step's kernels before the waiting blocks of a vision call (a
    batched call is ~150 ms of large GEMMs), so the groups already decoding are not held
    behind it."""
    if device.type != "cuda":
        return nullcontext
    stream = torch.cuda.Stream(device, priority=-1)  # -1: high; the tower's stream keeps 0
    stream.wait_stream(torch.cuda.current_stream(device))  # the pool zeroed, weights copied
    return lambda: torch.cuda.stream(stream)
