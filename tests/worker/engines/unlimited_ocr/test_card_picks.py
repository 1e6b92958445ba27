"""bench.engine.card_picks reads what mlp_bench and attention_bench wrote on a card (run T, an
H100: bench/results/*_h100_2026-12-06_run-t.json) and picks a setting only where it beats the
default by more than the runs' spread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.engine import card_picks

RESULTS = Path(__file__).parents[4] / "bench" / "results"
MLP = RESULTS / "mlp_bench_h100_2026-12-06_run-t.json"
ATTENTION = RESULTS / "attention_bench_h100_2026-12-06_run-t.json"


def test_the_fastest_settings_of_run_t_are_picked_over_a_one_percent_margin() -> None:
    mlp, attention = json.loads(MLP.read_text()), json.loads(ATTENTION.read_text())
    # 186.7 µs against the default's 189.6; 5,966 against 6,052: both 1.4-1.5% faster
    assert card_picks.fastest_tiles(mlp, 128, 0.01)[0] == "swap_plan_w4_n64_k64_s5"
    assert card_picks.fastest_plan(attention, 128, 0.01)[0] == "mma_b16_w1_s2@1024"
    # within a 2% margin neither is worth a change
    assert card_picks.fastest_tiles(mlp, 128, 0.02)[0] == "-"
    assert card_picks.fastest_plan(attention, 128, 0.02)[0] == "-"


def test_the_command_prints_the_picks_on_one_line_for_a_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.engine.card_picks", str(MLP), str(ATTENTION)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["swap_plan_w4_n64_k64_s5", "mma_b16_w1_s2@1024"]
    assert "default 189.6" in done.stderr and "default 6052" in done.stderr
