"""Every command docker-compose.yml runs is one the CLI accepts (options, values, types)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest
import yaml

from uocr_cli.main import main

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
        if argv[:2] == ["sh", "-c"]:
            for part in argv[2].split("&&"):
                found.append((name, shlex.split(part)))
        else:
            found.append((name, argv))
    return [(name, argv[1:]) for name, argv in found if argv[0] == "uocr"]


COMMANDS = _uocr_commands()


def _parse(command: click.Command, args: list[str], parent: click.Context | None = None) -> str:
    """Parse as `uocr` would, down to the command that would run; returns its path. Raises
    click's UsageError (an unknown option, a bad value) where the CLI would refuse."""
    ctx = command.make_context(command.name or "uocr", list(args), parent=parent)
    if not isinstance(command, click.Group):
        return ctx.command_path
    rest = [*ctx._protected_args, *ctx.args]
    _, sub, sub_args = command.resolve_command(ctx, rest)
    assert sub is not None
    return _parse(sub, sub_args, ctx)


def test_the_compose_file_runs_uocr_commands() -> None:
    services = {name for name, _ in COMMANDS}
    assert {"migrate", "api", "cpu-worker", "control-worker", "flower"} <= services


@pytest.mark.parametrize(("service", "args"), COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_the_cli_accepts_each_compose_command(service: str, args: list[str]) -> None:
    assert _parse(main, args).startswith("uocr ")


def test_a_bad_command_is_refused() -> None:
    """The check can fail: an option the CLI lacks, a value of the wrong type."""
    with pytest.raises(click.NoSuchOption):
        _parse(main, ["api", "--threads", "2"])
    with pytest.raises(click.BadParameter):
        _parse(main, ["api", "--workers", "two"])
    with pytest.raises(click.UsageError):
        _parse(main, ["db", "migrate"])
