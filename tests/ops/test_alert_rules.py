"""The alert rules load and fire on the situations they name: promtool unit tests on series
shaped like real scrapes from two API replicas and the workers. Alertmanager's config routes
each severity where the runbook says. (That the rules read only metrics the services export is
checked against the running API in tests/e2e/test_round_trip.py; that an alert really reaches
its receiver, in tests/e2e/test_alerts.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "ops"
RULES = OPS / "prometheus-alerts.yml"


def ops_binary(name: str) -> str:
    """promtool, prometheus, prometheus-alertmanager, amtool: on PATH or from .ci/setup."""
    found = shutil.which(name) or str(ROOT / ".ci-state" / "bin" / name)
    if not Path(found).is_file():
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail(f"{name} is not installed: bash .ci/setup installs it")
        pytest.skip(f"{name} is not installed: bash .ci/setup installs it")
    return found


def _run(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def rules() -> list[dict]:  # type: ignore[type-arg]
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_rules_load_and_fire_when_they_should() -> None:
    promtool = ops_binary("promtool")
    assert f"SUCCESS: {len(rules())} rules found" in _run(promtool, "check", "rules", str(RULES))
    here = Path(__file__).parent
    assert "SUCCESS" in _run(promtool, "test", "rules", "alerts_test.yml", cwd=here)


def test_the_shipped_prometheus_config_loads_the_rules() -> None:
    checked = _run(ops_binary("promtool"), "check", "config", str(OPS / "prometheus.yml"))
    assert f"SUCCESS: {len(rules())} rules found" in checked


@pytest.mark.parametrize(("severity", "receiver"), [("critical", "pager"), ("warning", "ticket")])
def test_each_severity_reaches_its_receiver(severity: str, receiver: str) -> None:
    amtool = ops_binary("amtool")
    config = f"--config.file={OPS / 'alertmanager.yml'}"
    assert "SUCCESS" in _run(amtool, "check-config", str(OPS / "alertmanager.yml"))
    routed = _run(amtool, "config", "routes", "test", config, f"severity={severity}")
    assert routed.strip() == receiver


def test_every_rule_has_a_routed_severity() -> None:
    assert {rule["labels"]["severity"] for rule in rules()} == {"critical", "warning"}
