"""The group: -h and --version on every command, --debug for the traceback."""

from __future__ import annotations

from importlib.metadata import version

import click
import pytest
from click.testing import CliRunner

from tests.cli.conftest import UNREACHABLE, uocr
from uocr_cli.main import main


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


COMMANDS = _commands(main)


def test_every_command_is_reached() -> None:
    assert {("api",), ("worker",), ("flower",), ("db", "upgrade"), ("run",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "uocr")
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_on_every_command(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(main, [*path, flag])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: uocr {' '.join(path)}".rstrip())


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "uocr")
def test_version_on_every_command(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(f"version {version('uocr')}")


def test_debug_shows_the_traceback() -> None:
    plain, debug = (
        uocr("keys", "list", env=UNREACHABLE),
        uocr("--debug", "keys", "list", env=UNREACHABLE),
    )
    assert plain.returncode == debug.returncode == 1
    assert "Traceback" not in plain.stderr
    assert "Traceback (most recent call last)" in debug.stderr
    assert "OperationalError" in debug.stderr
