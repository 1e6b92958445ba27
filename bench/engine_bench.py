"""Our page-group decoding engine against transformers' own `generate`, in one run.

Full-size Unlimited-OCR v1 architecture with random weights (bf16), forced output lengths,
random stand-in visual embeddings (273 per page). Ours runs twice: with R-SWA, the rule v1 was
trained with and the default (every step reads the whole group prefix + the window), and with
SR-SWA, opt-in (BOS, prompt, at most ``--sr-swa-blocks`` blocks + the window). Prints one
table and writes JSON.

    python -m bench.engine_bench --out bench/engine_bench.json          # on the H200
    python -m bench.engine_bench --tiny --new-tokens 16 --pages 2 6     # CPU smoke test
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from bench import attention_bench, mlp_bench
from bench.full_checkpoint import randomize
from ocr_worker.engines.unlimited_ocr.kernels import tuning
from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.runtime.decode_loop import DecodeLoop
from ocr_worker.engines.unlimited_ocr.runtime.scheduler import DecodeRequest, NewSegment, Scheduler
from ocr_worker.engines.unlimited_ocr.step import fused_step
from ocr_worker.engines.unlimited_ocr.step.model_runner import ModelRunner
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import VisualKVWorkspace
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment
from ocr_worker.stage_clock import clock
from uocr_core.page_groups import PageGroupPlanner
from uocr_core.settings import UnlimitedOcrSettings

PAGE_TOKENS, PROMPT_TOKENS = 273, 5  # + BOS = 273 * pages + 6, as in ENGINE_NOTES' baseline
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
    parser.add_argument("--tiny", action="store_true", help="the tiny model (a CPU smoke run)")
    parser.add_argument("--group-tokens", type=int, default=256)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--workspace-gb", type=float, default=workspace_gb)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-cuda-graphs", action="store_true")


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
    8 page lists, as the steady step had them from run F to run M, read far fewer experts'
    weights a step than 128 documents do."""
    start, stride = sequence % STAND_INS, 2 * (sequence // STAND_INS) + 1  # odd: a cycle of 64
    return [start + p * stride for p in range(pages)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# -- transformers' generate ----------------------------------------------------------------


def baseline(model, pages: int, batch: int, new_tokens: int, full: bool, device, dtype) -> dict:  # type: ignore[no-untyped-def]
    text = model.config.text_config
    saved = list(text.layer_types)
    text.layer_types = ["full_attention" if full else t for t in saved]
    prefix = PAGE_TOKENS * pages + PROMPT_TOKENS + 1
    embeds = torch.stack(
        [stand_in(prefix, text.hidden_size, device, dtype, s) for s in range(batch)]
    )
    mask = torch.ones(batch, prefix, dtype=torch.long, device=device)
    times = []
    try:
        for steps in (1, new_tokens):
            torch.cuda.empty_cache() if device.type == "cuda" else None
            base = torch.cuda.memory_allocated() if device.type == "cuda" else 0
            torch.cuda.reset_peak_memory_stats() if device.type == "cuda" else None
            sync(device)
            started = time.perf_counter()
            model.generate(
                inputs_embeds=embeds,
                attention_mask=mask,
                max_new_tokens=steps,
                min_new_tokens=steps,
                do_sample=False,
            )
            sync(device)
            times.append(time.perf_counter() - started)
            peak = (torch.cuda.max_memory_allocated() - base) if device.type == "cuda" else 0
    finally:
        text.layer_types = saved
    decode = times[1] - times[0]
    held = prefix + (new_tokens if full else min(new_tokens, text.sliding_window))
    return {
        "tok_s": batch * new_tokens / times[1],
        "decode_tok_s": batch * (new_tokens - 1) / decode,
        "ms_step": 1000 * decode / (new_tokens - 1),
        "kv_per_seq_gb": held * kv_bytes(text) / GB,
        "peak_gb": peak / GB,
    }


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


# -- ours ----------------------------------------------------------------------------------


class Engine:
    def __init__(self, model, args, device, dtype, sr_swa_blocks: int, fused: bool = True) -> None:  # type: ignore[no-untyped-def]
        text = model.config.text_config
        self.text, self.device, self.dtype = text, device, dtype
        self.workspace = VisualKVWorkspace.from_bytes(
            workspace_bytes=int(args.workspace_gb * 2**30),
            bytes_per_token=kv_bytes(text),
            block_size=args.block_size,
        )
        selector = (
            BlockSelector(SrSwaSettings(max_blocks=sr_swa_blocks), block_size=args.block_size)
            if sr_swa_blocks
            else None
        )
        self.runner = ModelRunner(
            model,
            num_blocks=self.workspace.num_blocks,
            block_size=args.block_size,
            device=device,
            dtype=dtype,
            selector=selector,
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
        sync(self.device)
        started = time.perf_counter()
        with ThreadPoolExecutor(documents) as pool:
            tokens = sum(pool.map(lambda i: self.document(i, pages, new_tokens), range(documents)))
        sync(self.device)
        elapsed = time.perf_counter() - started
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
        sync(self.device)
        started = time.perf_counter()
        for _ in range(steps):
            self.scheduler.step()
        sync(self.device)
        elapsed = (time.perf_counter() - started) * 1000 / steps
        self.scheduler.abort_all()
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    engine_options(parser, workspace_gb=4.0)
    parser.add_argument("--pages", type=int, nargs="+", default=[10, 100, 300])
    parser.add_argument("--throughput-pages", type=int, default=100)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--sr-swa-blocks", type=int, default=12)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--step-batches", type=int, nargs="*", default=[128])
    parser.add_argument("--throughput-docs", type=int, nargs="*", default=[128])
    parser.add_argument("--compare-torch", action="store_true", help="also the torch-ops step")
    parser.add_argument("--realistic-page-tokens", type=int, default=0)
    parser.add_argument("--realistic-pages", type=int, default=24)
    # A GPU lease is short: some rules may be measured in part (the others in full).
    parser.add_argument("--steps-only", nargs="*", default=[], help="rules: step times only")
    parser.add_argument(
        "--brief", nargs="*", default=[], help="rules: step times and --throughput-docs only"
    )
    parser.add_argument(
        "--prefill-moe",
        choices=fused_step.PREFILL_MOES,
        default=fused_step.PREFILL_MOE,
        help="how a prefill runs its MoE (fused_step.PREFILL_MOE)",
    )
    parser.add_argument(
        "--prefill-attention",
        choices=fused_step.PREFILL_ATTENTIONS,
        default=fused_step.PREFILL_ATTENTION,
        help="how a prefill pass attends (fused_step.PREFILL_ATTENTION)",
    )
    parser.add_argument(
        "--prefill-max-rows", type=int, default=0, help="rows a prefill pass (0: the default)"
    )
    parser.add_argument(
        "--moe-tiles",
        choices=[name for name, tiles in mlp_bench.VARIANTS.items() if tiles],
        help="mlp_bench's tiles of this name for every MoE launch of FEW_TOKENS+1 to "
        "SORT_PAIRS_ABOVE rows (the card's moe_many_tokens in kernels/tuning.py: the steps of "
        "33-256 sequences; "
        "a prefill's MoE by --prefill-moe grouped_mm is torch's GEMMs either way)",
    )
    parser.add_argument(
        "--attention-plan",
        type=attention_bench.parse_plan,
        help="attention_bench's tile@programs for the steps over 16 sequences on this card "
        "(the card's attention plans in kernels/tuning.py)",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--timeline", type=Path, help="write each throughput run's steps and prefills (JSON)"
    )
    args = parser.parse_args()
    fused_step.PREFILL_MOE = args.prefill_moe
    fused_step.PREFILL_ATTENTION = args.prefill_attention
    model, device, dtype = bench_model(args.tiny)
    text = model.config.text_config
    card = tuning.card_name(device)
    plan = args.attention_plan and attention_bench.plan_name(args.attention_plan)
    results: dict = {
        "device": card,
        "args": vars(args) | {"out": str(args.out), "attention_plan": plan},
    }
    if args.moe_tiles:
        tiles = mlp_bench.VARIANTS[args.moe_tiles]
        assert tiles is not None  # (choices holds the named tile sets only)
        tuning.retune(card, moe_many_tokens=tiles)
    if args.attention_plan:  # before any step graph is captured
        tuning.retune(card, attention=attention_bench.with_plan(card, args.attention_plan))
    engines = {"rswa": Engine(model, args, device, dtype, 0)}
    if args.sr_swa_blocks:
        engines["srswa"] = Engine(model, args, device, dtype, args.sr_swa_blocks)
    if args.compare_torch:  # the decode step as plain torch ops: the numbers before our kernels
        engines["rswa_torch"] = Engine(model, args, device, dtype, 0, fused=False)
    tp = args.throughput_pages
    positions_ok = {
        p: PAGE_TOKENS * p + 6 + args.new_tokens <= text.max_position_embeddings for p in args.pages
    }
    if not args.skip_baseline:
        for full in (False, True):
            for batch in (1, args.concurrency):
                key = f"hf_{'full' if full else 'rswa'}_{tp}p_{batch}"
                results[key] = baseline(model, tp, batch, args.new_tokens, full, device, dtype)
                print(key, results[key], flush=True)
        for pages in args.pages:
            if positions_ok[pages] and pages != tp:
                results[f"hf_rswa_{pages}p_1"] = baseline(model, pages, 1, 64, False, device, dtype)
    for rule, engine in engines.items():
        for sequences in sorted({1, args.concurrency, *args.step_batches}):
            results[f"{rule}_step_ms_{sequences}"] = engine.step_ms(sequences, args.group_size, 50)
            print(f"{rule}_step_ms_{sequences}", results[f"{rule}_step_ms_{sequences}"], flush=True)
        if rule in args.steps_only:
            continue
        brief = rule in args.brief
        for pages in [] if brief else args.pages:
            results[f"{rule}_{pages}p_1"] = engine.run(1, pages, 32)
            print(f"{rule}_{pages}p_1", results[f"{rule}_{pages}p_1"], flush=True)
        every = {1, args.concurrency, *args.throughput_docs}
        for docs in sorted(set(args.throughput_docs) if brief else every):
            engine.scheduler.max_concurrency = max(args.concurrency, docs)
            # a service compiles its kernels and captures its step graphs once: an untimed run
            if docs > 1:
                engine.run(docs, 2 * args.group_size, 16)
            timeline = engine.record_timeline() if args.timeline and docs > 1 else None
            key = f"{rule}_{tp}p_{docs}_throughput"
            results[key] = engine.run(docs, tp, args.group_tokens) | {"warmed": docs > 1}
            if timeline is not None:
                path = args.timeline.with_name(f"{args.timeline.stem}_{rule}_{docs}.json")
                path.write_text(json.dumps(timeline))
                for recorded in ("decode", "prefill_many"):  # the class's methods again
                    delattr(engine.runner, recorded)
            print(f"{rule}_{tp}p_{docs}", results[key], flush=True)
        if args.realistic_page_tokens and rule != "rswa_torch" and not brief:
            engine.scheduler.max_concurrency = args.concurrency
            per_group = args.realistic_page_tokens * args.group_size
            key = f"{rule}_realistic_{args.realistic_pages}p_{args.concurrency}"
            results[key] = engine.run(args.concurrency, args.realistic_pages, per_group)
            print(key, results[key], flush=True)
            # The same with the service's n-gram bans: the guard's host work, the bans applied.
            engine.ngram_size = UnlimitedOcrSettings().ngram_size
            results[f"{key}_ngram_bans"] = engine.run(
                args.concurrency, args.realistic_pages, per_group
            )
            engine.ngram_size = 0
            print(f"{key}_ngram_bans", results[f"{key}_ngram_bans"], flush=True)
    if args.skip_baseline:
        print_goals(results, args)
    else:
        print_table(results, args, positions_ok)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))


def print_table(r: dict, args, positions_ok: dict) -> None:  # type: ignore[no-untyped-def]
    """Ours with R-SWA (default) and SR-SWA (opt-in) beside transformers; the last column is
    ours R-SWA against transformers R-SWA (memory, tokens/s) or full attention (step time)."""
    tp, c = args.throughput_pages, args.concurrency
    fmt = lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"  # noqa: E731
    get = lambda key, field: r.get(key, {}).get(field)  # noqa: E731
    print(
        f"\n{r['device']}: ours = page groups of {args.group_size}; R-SWA (default) and SR-SWA "
        f"({args.sr_swa_blocks} blocks x {args.block_size} + BOS, prompt, window); "
        "hf = transformers generate"
    )
    header = ("ours R-SWA", "ours SR-SWA", "hf R-SWA", "hf full", "R-SWA/hf")
    print(f"{'metric':<42}" + "".join(f"{h:>12}" for h in header))

    def row(label: str, rswa, srswa, hf, full, ratio) -> None:  # type: ignore[no-untyped-def]
        cells = (fmt(rswa), fmt(srswa), fmt(hf), fmt(full), ratio)
        print(f"{label:<42}" + "".join(f"{v:>12}" for v in cells))

    for pages in args.pages:
        hf = get(f"hf_rswa_{pages}p_1", "kv_per_seq_gb") if positions_ok[pages] else None
        ours = get(f"rswa_{pages}p_1", "kv_per_seq_gb")
        ratio = fmt(ours / hf) if hf and ours else "n/a"
        sr = get(f"srswa_{pages}p_1", "kv_per_seq_gb")
        row(f"KV peak per sequence, {pages} pages (GB)", ours, sr, hf, None, ratio)
    for n in (1, c):
        ours, hf = get(f"rswa_{tp}p_{n}_throughput", "tok_s"), get(f"hf_rswa_{tp}p_{n}", "tok_s")
        sr, full = get(f"srswa_{tp}p_{n}_throughput", "tok_s"), get(f"hf_full_{tp}p_{n}", "tok_s")
        ratio = fmt(ours / hf) if hf and ours else ""
        row(f"tokens/s, {n} concurrent, {tp}-page docs", ours, sr, hf, full, ratio)
    for n in (1, c):
        ours, sr = r.get(f"rswa_step_ms_{n}"), r.get(f"srswa_step_ms_{n}")
        hf, full = get(f"hf_rswa_{tp}p_{n}", "ms_step"), get(f"hf_full_{tp}p_{n}", "ms_step")
        ratio = fmt(full / ours) if full and ours else ""
        row(f"ms per decode step, {n} seq, {tp} pages", ours, sr, hf, full, ratio)


def print_goals(r: dict, args) -> None:  # type: ignore[no-untyped-def]
    """Issue 16's table: ours with our kernels beside the torch-ops step, and the goals."""
    tp, c = args.throughput_pages, args.concurrency
    rules = [k for k in ("rswa", "rswa_torch", "srswa") if f"{k}_step_ms_1" in r]
    names = {"rswa": "R-SWA kernels", "rswa_torch": "R-SWA torch ops", "srswa": "SR-SWA kernels"}
    print(f"\n{r['device']}: page groups of {args.group_size}, {tp}-page documents")
    print(f"{'metric':<52}" + "".join(f"{names[k]:>17}" for k in rules))
    for n in sorted({1, c, *args.step_batches}):
        cells = [r.get(f"{k}_step_ms_{n}") for k in rules]
        print(f"{f'ms per decode step, {n} sequences':<52}" + "".join(f"{v:>17.2f}" for v in cells))
    for n in sorted({1, c, *args.throughput_docs}):
        cells = [r.get(f"{k}_{tp}p_{n}_throughput", {}).get("tok_s") for k in rules]
        label = f"tokens/s, {n} concurrent documents ({args.group_tokens}/group)"
        print(f"{label:<52}" + "".join(f"{v:>17.0f}" if v else f"{'n/a':>17}" for v in cells))
    for suffix, bans in (("", ""), ("_ngram_bans", ", n-gram bans")):
        key = f"_realistic_{args.realistic_pages}p_{c}{suffix}"
        cells = [r.get(f"{k}{key}", {}).get("tok_s") for k in rules]
        label = f"tokens/s, {c} docs, {args.realistic_page_tokens} tokens a page{bans}"
        print(f"{label:<52}" + "".join(f"{v:>17.0f}" if v else f"{'n/a':>17}" for v in cells))


if __name__ == "__main__":
    main()
