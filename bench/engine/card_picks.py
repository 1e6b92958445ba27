"""A card's fastest experts' tiles and attention plan for the steps of many sequences, from
mlp_bench's and attention_bench's JSON of one run on it, and the flags that try them in the
engine against the defaults (tiles_bench) or measure the goals with them (engine_bench).

    python3 -m bench.engine.mlp_bench --tokens 128 --out mlp.json
    python3 -m bench.engine.attention_bench --batches 128 --out attention.json
    python3 -m bench.engine.card_picks mlp.json attention.json [--tokens 128] [--margin 0.01]

A choice is printed only where it beats the default by more than ``--margin`` (the runs'
spread is about 1%); else "-". Prints one line: the tiles and the plan (for a script's
``read``), then, on stderr, the timings behind them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import harness


def fastest_tiles(mlp: dict[str, Any], tokens: int, margin: float) -> tuple[str, str]:
    """(the named tile set, or "-", and why) from mlp_bench's MoE row at ``tokens``."""
    row = mlp[f"moe_{tokens}"]
    timed = {
        key[len("ours_") : -len("_us")]: us
        for key, us in row.items()
        if key.startswith("ours_") and key.endswith("_us") and us and "merge_" not in key
    }
    best = min(timed, key=timed.__getitem__)
    default = timed["default"]
    chosen = best if best != "default" and timed[best] < (1 - margin) * default else "-"
    return chosen, f"experts' tiles: {best} {timed[best]:.1f} µs, default {default:.1f}"


def fastest_plan(attention: dict[str, Any], batch: int, margin: float) -> tuple[str, str]:
    """(tile@programs, or "-", and why) from attention_bench's report at ``batch``."""
    report = attention[f"batch_{batch}"]
    best, default = report["fastest"], report["default"]["us"]
    chosen = best["name"] if best["us"] < (1 - margin) * default else "-"
    return chosen, f"attention: {best['name']} {best['us']:.0f} µs, default {default:.0f}"


def main() -> None:
    parser = harness.parser(__doc__, results=False)
    parser.add_argument("mlp", type=Path, help="mlp_bench --out")
    parser.add_argument("attention", type=Path, help="attention_bench --out")
    parser.add_argument("--tokens", type=int, default=128, help="a step's sequences")
    parser.add_argument("--margin", type=float, default=0.01)
    args = parser.parse_args()
    tiles, why_tiles = fastest_tiles(json.loads(args.mlp.read_text()), args.tokens, args.margin)
    plan, why_plan = fastest_plan(json.loads(args.attention.read_text()), args.tokens, args.margin)
    print(tiles, plan)
    print(f"{why_tiles}; {why_plan}", file=sys.stderr)


if __name__ == "__main__":
    main()
