"""The engine benches' common ground: the full-size v1 with random weights (or the tests' tiny
model), stand-in pages, and ``Engine``, our page-group engine built as the service builds it, with
ways to run documents through it and time its steady step (engine_bench, engine_soak_bench,
tiles_bench, run_profile, step_profile, overlap_bench)."""

from __future__ import annotations

import argparse
import functools
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from bench import harness
from bench.engine.full_checkpoint import randomize
from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.runtime.decode_loop import DecodeLoop
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, NewSegment, Scheduler
from ocr_worker.engines.unlimited_ocr.step import fused_step
from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import VisualKVWorkspace
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment
from ocr_worker.stage_clock import clock
from uocr_core.page_groups import PageGroupPlanner

PAGE_TOKENS, PROMPT_TOKENS = 273, 5  # + BOS: a group's prefix is 273 * pages + 6 rows
GB = 1e9


def build_model(tiny: bool, device: torch.device, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    from transformers.models.unlimited_ocr import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
    )

    if tiny:
        from tests.worker.engines.unlimited_ocr.tiny_model import TINY_TEXT, TINY_VISION, WINDOW

        config = UnlimitedOcrConfig(
            vision_config=TINY_VISION, text_config={**TINY_TEXT, "sliding_window": WINDOW}
        )
    else:
        config = UnlimitedOcrConfig()  # the defaults are the official v1
    # Built on the device, not on "meta": buffers (RoPE frequencies, CLIP positions) are
    # computed, not left as whatever memory to_empty found.
    with torch.device(device):
        model = UnlimitedOcrForConditionalGeneration._from_config(config, dtype=dtype)
    randomize(model, torch.Generator(device=device).manual_seed(0))
    return model.eval()


def bench_model(tiny: bool):  # type: ignore[no-untyped-def]
    """(model, device, dtype): full-size v1 in bf16 on the GPU, or with ``tiny`` the tests'
    tiny model (in fp32 where there is no GPU), whose pages then take its few positions."""
    global PAGE_TOKENS
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if tiny:
        PAGE_TOKENS = 7
    return build_model(tiny, device, dtype), device, dtype


def engine_options(parser: argparse.ArgumentParser, workspace_gb: float) -> None:
    """The options an Engine is built from (engine_bench, tiles_bench, run_profile)."""
    harness.arguments(parser, tiny=False, workspace_gb=workspace_gb, concurrency=16)
    harness.arguments(parser, no_cuda_graphs=False)
    parser.add_argument("--group-tokens", type=int, default=256, help="tokens a page group")
    parser.add_argument("--group-size", type=int, default=8, help="pages a page group")
    parser.add_argument("--block-size", type=int, default=32, help="rows a KV block")


STAND_INS = 64  # distinct stand-in pages: each is made once, then shared


@functools.lru_cache(maxsize=4 * STAND_INS)
def _stand_in(tokens: int, hidden: int, device: torch.device, dtype: torch.dtype, seed: int):  # type: ignore[no-untyped-def]
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(tokens, hidden, device=device, dtype=dtype, generator=g)


def stand_in(tokens: int, hidden: int, device: torch.device, dtype: torch.dtype, seed: int):  # type: ignore[no-untyped-def]
    """A page's visual embeddings, one of STAND_INS. Made anew for every page, they put a
    round's ~1,000 generator and randn calls on the documents' threads, holding the GIL just
    when the loop admits the next groups; the service makes them in the vision tower's
    thread and stream, apart from the decode loop."""
    return _stand_in(tokens, hidden, device, dtype, seed % STAND_INS)


def distinct_pages(sequence: int, pages: int) -> list[int]:
    """Stand-in seeds for one of many sequences' pages: no two of the first STAND_INS x 32
    sequences alike (the same pages in the same order) over any two pages or more in a row.
    Alike sequences decode alike tokens and route them to the same experts: 128 sequences of
    8 page lists, as the steady step had them until 2026-12-06, read far fewer experts'
    weights a step than 128 documents do (bench/RESULTS.md, "GPU engine: decode throughput")."""
    start, stride = sequence % STAND_INS, 2 * (sequence // STAND_INS) + 1  # odd: a cycle of 64
    return [start + p * stride for p in range(pages)]


def free_running_guard(pages: int, ngram_size: int = 0) -> PageGuard:
    """A guard that never ends a page: forced output lengths, no budgets; with
    ``ngram_size``, the service's n-gram bans, as the service runs them (its host work each
    step, and the bans the token choice applies)."""
    return PageGuard(
        num_pages=pages,
        eos_id=1,
        marker_ids=(),
        page_budget=10**9,
        token_text=lambda _: "",
        ngram_size=ngram_size,
    )


def kv_bytes(text) -> int:  # type: ignore[no-untyped-def]
    return text.num_hidden_layers * 2 * text.num_key_value_heads * text.head_dim * 2


class Engine:
    def __init__(self, model, args, device, dtype, sr_swa_blocks: int, fused: bool = True) -> None:  # type: ignore[no-untyped-def]
        text = model.config.text_config
        self.text, self.device, self.dtype = text, device, dtype
        self.workspace = VisualKVWorkspace.from_bytes(
            workspace_bytes=int(args.workspace_gb * 2**30),
            bytes_per_token=kv_bytes(text),
            block_size=args.block_size,
        )
        rule = (
            BlockSelector(SrSwaSettings(max_blocks=sr_swa_blocks), block_size=args.block_size)
            if sr_swa_blocks
            else R_SWA
        )
        self.runner = ModelRunner(
            model,
            num_blocks=self.workspace.num_blocks,
            block_size=args.block_size,
            device=device,
            dtype=dtype,
            rule=rule,
            cuda_graphs=not args.no_cuda_graphs,
            fused_kernels=fused and device.type == "cuda",
        )
        self.scheduler = Scheduler(
            self.runner, self.workspace, args.concurrency, text.sliding_window
        )
        rows = getattr(args, "prefill_max_rows", 0)  # the benches that build one from few options
        self.scheduler.prefill_max_rows = rows or self.scheduler.prefill_max_rows
        self.loop = DecodeLoop(self.scheduler)
        self.planner = PageGroupPlanner(size=args.group_size, overlap=1)
        self.embed = model.model.language_model.embed_tokens
        self.ngram_size = 0  # the documents' guards: no n-gram bans unless set

    def document(self, index: int, pages: int, new_tokens: int) -> int:
        """Decode the ``index``-th document group by group (its pages the index-th distinct
        list: no two documents' groups alike); returns the tokens generated."""
        name, seeds = f"d{index}", distinct_pages(index, pages)
        kept: list[Segment] = []
        total = 0
        groups = self.planner.plan(pages)
        for group in groups:
            new = (
                []
                if kept
                else [NewSegment("bos", self.embed(torch.tensor([0], device=self.device)))]
            )
            new += [
                NewSegment(
                    "page",
                    stand_in(
                        PAGE_TOKENS,
                        self.text.hidden_size,
                        self.device,
                        self.dtype,
                        seeds[p],
                    ),
                    page_no=p,
                )
                for p in group.output_positions
            ]
            new.append(
                NewSegment(
                    "prompt",
                    stand_in(PROMPT_TOKENS, self.text.hidden_size, self.device, self.dtype, 7),
                )
            )
            size = group.last_position - group.first_position + 1
            guard = free_running_guard(size, self.ngram_size)
            last = group.group_index == len(groups) - 1
            request = DecodeRequest(
                f"{name}:{group.group_index}",
                kept,
                new,
                guard,
                new_tokens,
                keep_pages=() if last else (group.last_position,),
                ignore_eos=True,
            )
            finished = self.loop.decode(request)
            kept, total = finished.kept, total + len(finished.sequence.generated)
        return total

    def run(self, documents: int, pages: int, new_tokens: int) -> dict:
        self.workspace.peak_used = self.workspace.num_used
        base = torch.cuda.memory_allocated() if self.device.type == "cuda" else 0
        torch.cuda.reset_peak_memory_stats() if self.device.type == "cuda" else None
        self.loop.call(lambda: None)  # ends the loop's idle wait, so none of it counts here
        steps_before, clock_before = self.steps(), clock.totals()
        with harness.Stopwatch(self.device) as watch, ThreadPoolExecutor(documents) as pool:
            tokens = sum(pool.map(lambda i: self.document(i, pages, new_tokens), range(documents)))
        elapsed = watch.seconds
        block_bytes = kv_bytes(self.text) * self.workspace.block_size
        spent = {k: v - clock_before.get(k, 0.0) for k, v in clock.totals().items()}
        return {
            "tok_s": tokens / elapsed,
            "steps": self.steps() - steps_before,
            # Where the decode thread's time went: prefills stall every sequence's steps.
            "seconds": round(elapsed, 2),
            "prefill_s": round(spent.get("prefill", 0.0), 2),
            "decode_s": round(spent.get("decode", 0.0), 2),
            # Neither: the loop waiting for documents' next groups, and its bookkeeping
            # between steps (admitting, retiring). Since 2026-12-06 the wait for a pass's
            # first tokens falls in decode_s (they are read as the next step runs), where it
            # fell here before.
            "between_s": round(elapsed - spent.get("prefill", 0.0) - spent.get("decode", 0.0), 2),
            "idle_s": round(spent.get("idle", 0.0), 2),  # of between_s: no request to run
            "mean_step_rows": round(spent.get("step_rows", 0) / max(1, spent.get("steps", 0)), 1),
            "prefill_passes": int(spent.get("prefill_passes", 0)),
            "kv_per_seq_gb": self.workspace.peak_used * block_bytes / documents / GB,
            # False: a kernel failed and the run finished on torch's ops
            "fused_kernels": self.runner.fused is not None,
            "prefill_moe": fused_step.PREFILL_MOE,
            "prefill_attention": fused_step.PREFILL_ATTENTION,
            "prefill_max_rows": self.scheduler.prefill_max_rows,
            "activation_peak_gb": (
                (torch.cuda.max_memory_allocated() - base) / GB if self.device.type == "cuda" else 0
            ),
        }

    def steps(self) -> int:
        return self.scheduler.steps

    def record_timeline(self) -> list[tuple[str, float, float, int]]:
        """From now on, each step and prefill pass of the loop: (kind, start, seconds, rows),
        the seconds the host spent (launches, and waiting where the host reads the GPU)."""
        events: list[tuple[str, float, float, int]] = []
        runner = self.runner

        def timed(kind, call, size):  # type: ignore[no-untyped-def]
            def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
                started = time.perf_counter()
                try:
                    return call(*args, **kwargs)
                finally:
                    now = time.perf_counter()
                    events.append((kind, round(started, 5), round(now - started, 5), size(args)))

            return wrapper

        runner.decode = timed("step", runner.decode, lambda a: len(a[0]))  # type: ignore[method-assign]
        runner.prefill_many = timed("prefill", runner.prefill_many, lambda a: len(a[0]))  # type: ignore[method-assign]
        return events

    def step_ms(self, sequences: int, pages: int, steps: int) -> float:
        """Steady decode: ``sequences`` groups of ``pages`` pages, timed over ``steps`` steps."""
        self.scheduler.max_concurrency = max(self.scheduler.max_concurrency, sequences)
        for i in range(sequences):
            new = [NewSegment("bos", self.embed(torch.tensor([0], device=self.device)))]
            new += [
                NewSegment(
                    "page",
                    stand_in(PAGE_TOKENS, self.text.hidden_size, self.device, self.dtype, seed),
                    page_no=p,
                )
                for p, seed in enumerate(distinct_pages(i, pages))
            ]
            guard = free_running_guard(pages)
            self.scheduler.submit(
                DecodeRequest(f"s{i}", [], new, guard, 10 * steps + 20, ignore_eos=True)
            )
        for _ in range(10):  # admit everyone, warm up
            self.scheduler.step()
        with harness.Stopwatch(self.device) as watch:
            for _ in range(steps):
                self.scheduler.step()
        self.scheduler.abort_all()
        return watch.ms / steps
