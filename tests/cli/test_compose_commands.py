"""Every command docker-compose.yml runs is one the CLI accepts (options, values, types)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest
import yaml

from tests.cli.command_lines import parse_uocr, uocr_invocations

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _uocr_commands() -> list[tuple[str, list[str]]]:
    """(service, argv after `uocr`) for each uocr command, also inside `sh -c "a && b"`."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    found = []
    for name, service in services.items():
        command = service.get("command")
        if not command:
            continue
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        found += [(name, args) for args in uocr_invocations(argv)]
    return found


COMMANDS = _uocr_commands()


def test_the_compose_file_runs_uocr_commands() -> None:
    services = {name for name, _ in COMMANDS}
    assert {"migrate", "api", "cpu-worker", "control-worker", "flower"} <= services


@pytest.mark.parametrize(("service", "args"), COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_the_cli_accepts_each_compose_command(service: str, args: list[str]) -> None:
    assert parse_uocr(args).command_path.startswith("uocr ")


def test_a_bad_command_is_refused() -> None:
    """The check can fail: an option the CLI lacks, a value of the wrong type."""
    with pytest.raises(click.NoSuchOption):
        parse_uocr(["api", "--threads", "2"])
    with pytest.raises(click.BadParameter):
        parse_uocr(["api", "--workers", "two"])
    with pytest.raises(click.UsageError):
        parse_uocr(["db", "migrate"])
