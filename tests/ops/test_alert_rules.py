"""The alert rules load and fire on the situations they name: promtool unit tests on series
shaped like real scrapes from two API replicas. (That the rules read only metrics the API
exports is checked against the running API in tests/e2e/test_round_trip.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus-alerts.yml"


def _promtool() -> str:
    found = shutil.which("promtool") or str(ROOT / ".ci-state" / "bin" / "promtool")
    if not Path(found).is_file():
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail("promtool is not installed: bash .ci/setup installs it")
        pytest.skip("promtool is not installed: bash .ci/setup installs it")
    return found


def _run(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_load_and_fire_when_they_should() -> None:
    promtool = _promtool()
    assert "SUCCESS: 4 rules found" in _run(promtool, "check", "rules", str(RULES))
    here = Path(__file__).parent
    assert "SUCCESS" in _run(promtool, "test", "rules", "alerts_test.yml", cwd=here)
