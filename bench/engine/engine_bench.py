"""Our page-group decoding engine against transformers' own `generate`, in one run.

Full-size Unlimited-OCR v1 architecture with random weights (bf16), forced output lengths,
random stand-in visual embeddings (273 per page). Ours runs twice: with R-SWA, the rule v1 was
trained with and the default (every step reads the whole group prefix + the window), and with
SR-SWA, opt-in (BOS, prompt, at most ``--sr-swa-blocks`` blocks + the window). Prints one
table and writes JSON.

    python -m bench.engine.engine_bench                                     # on the GPU
    python -m bench.engine.engine_bench --tiny --new-tokens 16 --pages 2 6  # CPU smoke test
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from bench import harness
from bench.engine import attention_bench, mlp_bench, setup
from bench.engine.setup import GB, Engine, bench_model, engine_options, kv_bytes, stand_in
from bench.service import page_lengths
from bench.service.page_lengths import PageLengths
from ocr_worker.engines.unlimited_ocr.kernels import tuning
from ocr_worker.engines.unlimited_ocr.step import fused_step
from uocr_core.settings import UnlimitedOcrSettings

# -- transformers' generate ----------------------------------------------------------------


def baseline(model, pages: int, batch: int, new_tokens: int, full: bool, device, dtype) -> dict:  # type: ignore[no-untyped-def]
    text = model.config.text_config
    saved = list(text.layer_types)
    text.layer_types = ["full_attention" if full else t for t in saved]
    prefix = setup.PAGE_TOKENS * pages + setup.PROMPT_TOKENS + 1
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
            with harness.Stopwatch(device) as watch:
                model.generate(
                    inputs_embeds=embeds,
                    attention_mask=mask,
                    max_new_tokens=steps,
                    min_new_tokens=steps,
                    do_sample=False,
                )
            times.append(watch.seconds)
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


def main() -> None:
    parser = harness.parser(__doc__, pages=[10, 100, 300], sr_swa_blocks=12, step_batches=[128])
    engine_options(parser, workspace_gb=4.0)
    parser.add_argument("--throughput-pages", type=int, default=100)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--throughput-docs", type=int, nargs="*", default=[128])
    parser.add_argument("--compare-torch", action="store_true", help="also the torch-ops step")
    parser.add_argument("--realistic-page-tokens", type=int, default=0)
    parser.add_argument("--realistic-pages", type=int, default=24)
    parser.add_argument(
        "--realistic-mix",
        choices=page_lengths.MIXES,
        default="fixed",
        help="fixed: every page --realistic-page-tokens; real: each page its own length, shaped "
        "like the real model's output, at that mean (bench/service/page_lengths.py)",
    )
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
    parser.add_argument(
        "--timeline", type=Path, help="write each throughput run's steps and prefills (JSON)"
    )
    args = parser.parse_args()
    fused_step.PREFILL_MOE = args.prefill_moe
    fused_step.PREFILL_ATTENTION = args.prefill_attention
    model, device, dtype = bench_model(args.tiny)
    text = model.config.text_config
    card = harness.card(device)
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
        p: setup.PAGE_TOKENS * p + 6 + args.new_tokens <= text.max_position_embeddings
        for p in args.pages
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
            lengths = PageLengths(args.realistic_mix, args.realistic_page_tokens)
            key = f"{rule}_realistic_{args.realistic_pages}p_{args.concurrency}"
            results[key] = realistic_run(engine, args, lengths)
            print(key, results[key], flush=True)
            # The same with the service's n-gram bans: the guard's host work, the bans applied.
            engine.ngram_size = UnlimitedOcrSettings().ngram_size
            results[f"{key}_ngram_bans"] = realistic_run(engine, args, lengths)
            engine.ngram_size = 0
            print(f"{key}_ngram_bans", results[f"{key}_ngram_bans"], flush=True)
    if args.skip_baseline:
        print_goals(results, args)
    else:
        print_table(results, args, positions_ok)
    harness.write(results, args, card)


def realistic_run(engine: Engine, args, lengths: PageLengths) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """``--concurrency`` documents of ``--realistic-pages`` pages, each group decoding the sum of
    its output pages' lengths: ``lengths.draw`` of each page (document i's page p drawn as page
    i * 100,000 + p), every page the same with the fixed mix."""
    decode = engine.loop.decode

    def per_page(request):  # type: ignore[no-untyped-def]
        document = int(request.seq_id.split(":")[0][1:])  # Engine.document's "d<index>:<group>"
        request.max_new_tokens = sum(
            lengths.draw(document * 100_000 + s.page_no)
            for s in request.new
            if s.kind == "page" and s.page_no is not None
        )
        return decode(request)

    engine.loop.decode = per_page  # type: ignore[method-assign]
    try:
        result = engine.run(args.concurrency, args.realistic_pages, 0)
    finally:
        del engine.loop.decode  # the class's method again
    return result | {"page_lengths": lengths.summary()}


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
        mix = " (real mix, mean)" if args.realistic_mix == "real" else ""
        label = f"tokens/s, {c} docs, {args.realistic_page_tokens} tokens a page{mix}{bans}"
        print(f"{label:<52}" + "".join(f"{v:>17.0f}" if v else f"{'n/a':>17}" for v in cells))


if __name__ == "__main__":
    main()
