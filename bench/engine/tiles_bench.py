"""The engine's settings A/B on one card, each against the default:
- the experts' tiles of a step of many sequences (the card's moe_many_tokens in
  kernels/tuning.py, mlp_bench's named sets);
- the attention's plans (another card's plans in kernels/tuning.py on this one, or
  attention_bench's tile@programs for the steps over 16 sequences); with ``--together``, both;
- a prefill's last layer through every row, as before 2026-12-06 (fused_step.FusedStep.prefill
  now takes each part's last row alone past its k and v);
- a pass's first tokens read before the next step, as before 2026-12-06 (scheduler.Scheduler.
  _admit now leaves them to be read as that step runs);
- a prefill pass's attention another way (fused_step.PREFILL_ATTENTIONS).
R-SWA steps and a run of documents with each set, the default first, taking turns for
``--rounds`` rounds; each set's best against the default's. Full-size v1 with random bf16
weights (engine_bench.bench_model).

    python3 -m bench.engine.tiles_bench --tiles w8_n64_k128 swap_plan_w4_n64_k64_s6
    python3 -m bench.engine.tiles_bench --attention "NVIDIA H200" --step-batches 1 16 128
    python3 -m bench.engine.tiles_bench --tiles NAME --attention-plan mma_b32_w1_s3@4096 --together
    python3 -m bench.engine.tiles_bench --whole-last-layer --first-tokens-at-once --step-batches 128
    python3 -m bench.engine.tiles_bench --prefill-attention flash --step-batches 128

One engine serves every set: each set gets CUDA graphs of its own, in a pool of their own,
captured with its tiles. The sets' earlier graphs are kept, not freed: an A/B that cleared them
and recaptured into the same pool (2026-12-06) tripped an assert in torch's caching allocator
and left the rest of the run without graphs. The first round also warms up: reported is each
set's best round (bench/RESULTS.md, "GPU engine: kernels")."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bench import harness
from bench.engine import attention_bench, mlp_bench, setup
from bench.engine.setup import Engine
from ocr_worker.engines.unlimited_ocr.kernels import tuning
from ocr_worker.engines.unlimited_ocr.step import fused_step
from ocr_worker.engines.unlimited_ocr.step.cuda_graphs import CudaGraphSteps

Plans = tuple[tuning.AttentionPlan, ...]


@dataclass(frozen=True)
class Setup:
    tiles: tuning.Tiles  # the experts' for a step of many sequences
    plans: Plans  # the attention's on this card
    whole_last_layer: bool = False  # a prefill's last layer through every row
    first_tokens_at_once: bool = False  # a pass's read before the next step is launched
    prefill_attention: str = fused_step.PREFILL_ATTENTION


def use(engine: Engine, setup: Setup, retired: list[CudaGraphSteps]) -> None:
    """The engine with ``setup``, its steps in graphs captured anew."""
    card = tuning.card_name(engine.device)
    tuning.retune(card, moe_many_tokens=setup.tiles, attention=setup.plans)
    runner = engine.runner
    if runner.fused is not None:
        runner.fused.whole_last_layer = setup.whole_last_layer
        runner.fused.prefill_attention = setup.prefill_attention
    else:  # the torch ops: no last layer to set, and no tiles either
        assert not setup.whole_last_layer, "the fused step fell back to torch's ops"
    engine.scheduler.first_tokens_at_once = setup.first_tokens_at_once
    if runner.graphs is not None:
        retired.append(runner.graphs)
        runner.graphs = CudaGraphSteps(runner)


def measure(engine: Engine, args: argparse.Namespace) -> dict[str, float]:
    row = {f"step_ms_{n}": engine.step_ms(n, args.group_size, 50) for n in args.step_batches}
    if args.documents:
        engine.scheduler.max_concurrency = max(args.concurrency, args.documents)
        run = engine.run(args.documents, args.pages, args.group_tokens)
        row["tok_s"] = run["tok_s"]
    return row


def main() -> None:
    parser = harness.parser(
        __doc__,
        step_batches=[64, 128],
        documents=128,
        pages=100,
        help={"documents": "documents decoding at once (0: steps only)"},
    )
    named = [name for name, tiles in mlp_bench.VARIANTS.items() if tiles]
    parser.add_argument("--tiles", nargs="*", choices=named, default=[])
    parser.add_argument("--attention", nargs="*", choices=list(tuning.CARDS), default=[])
    parser.add_argument(
        "--attention-plan",
        nargs="*",
        type=attention_bench.parse_plan,
        default=[],
        help="attention_bench's tile@programs for the steps over 16 sequences",
    )
    parser.add_argument(
        "--together", action="store_true", help="also each --tiles with each --attention-plan"
    )
    parser.add_argument("--whole-last-layer", action="store_true", help="a prefill's, as before")
    parser.add_argument(
        "--first-tokens-at-once", action="store_true", help="a pass's read at once, as before"
    )
    parser.add_argument(
        "--prefill-attention",
        nargs="*",
        choices=fused_step.PREFILL_ATTENTIONS,
        default=[],
        help="a prefill pass's attention this way too",
    )
    harness.arguments(parser, rounds=2, help={"rounds": "rounds of every set, taking turns"})
    setup.engine_options(parser, workspace_gb=24.0)
    args = parser.parse_args()
    if not (
        args.tiles
        or args.attention
        or args.attention_plan
        or args.whole_last_layer
        or args.first_tokens_at_once
        or args.prefill_attention
    ):
        parser.error(
            "name what to set beside the default: --tiles, --attention, --attention-plan, "
            "--whole-last-layer, --first-tokens-at-once and/or --prefill-attention"
        )
    if args.together and not (args.tiles and args.attention_plan):
        parser.error("--together pairs --tiles with --attention-plan: name both")
    model, device, dtype = setup.bench_model(args.tiny)
    engine = Engine(model, args, device, dtype, 0)
    card = harness.card(device)
    tiles, plans = tuning.tuning_for(card).moe_many_tokens, tuning.tuning_for(card).attention
    sets = {"default": Setup(tiles, plans)}
    sets |= {name: Setup(mlp_bench.VARIANTS[name] or tiles, plans) for name in args.tiles}
    for other in args.attention:
        sets[f"attention of {other}"] = Setup(tiles, tuning.CARDS[other].attention)
    for plan in args.attention_plan:
        planned, label = attention_bench.with_plan(card, plan), attention_bench.plan_name(plan)
        sets[f"attention {label}"] = Setup(tiles, planned)
        for name in args.tiles if args.together else []:
            sets[f"{name}, attention {label}"] = Setup(sets[name].tiles, planned)
    if args.whole_last_layer:
        sets["whole last layer"] = Setup(tiles, plans, whole_last_layer=True)
    if args.first_tokens_at_once:
        sets["first tokens at once"] = Setup(tiles, plans, first_tokens_at_once=True)
    for way in args.prefill_attention:
        sets[f"prefill attention {way}"] = Setup(tiles, plans, prefill_attention=way)
    retired: list[CudaGraphSteps] = []
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in sets}
    for round_no in range(args.rounds):
        for name, chosen in sets.items():
            use(engine, chosen, retired)
            rounds[name].append(measure(engine, args))
            print(f"round {round_no + 1} {name}: {rounds[name][-1]}", flush=True)
    report(rounds)
    harness.write({"device": card, "rounds": rounds}, args, card)


def report(rounds: dict[str, list[dict[str, float]]]) -> None:
    """Each set's best round, and against the default's best (steps: default / set, so that
    above 1 is faster, as tokens/s: set / default)."""
    best = {
        name: {key: (max if key == "tok_s" else min)(row[key] for row in rows) for key in rows[0]}
        for name, rows in rounds.items()
    }
    base = best["default"]
    width = max(map(len, best)) + 2
    for name, row in best.items():
        cells = []
        for key, value in row.items():
            speedup = value / base[key] if key == "tok_s" else base[key] / value
            cells.append(f"{key} {value:.3f} ({speedup:.3f}x)")
        print(f"{name:<{width}}" + "  ".join(cells))


if __name__ == "__main__":
    main()
