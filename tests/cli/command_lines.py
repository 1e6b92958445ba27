"""Command lines that deployment files run (docker-compose.yml, deploy/k8s), parsed as `uocr`
would parse them, so a file naming an option or a value the CLI refuses fails a test."""

from __future__ import annotations

import shlex

import click

from uocr_cli.main import main


def uocr_invocations(argv: list[str]) -> list[list[str]]:
    """The argv after `uocr` of each uocr command in ``argv``, also inside `sh -c "a && b"`."""
    if argv[:2] == ["sh", "-c"]:
        commands = [shlex.split(part) for part in argv[2].split("&&")]
    else:
        commands = [argv]
    return [command[1:] for command in commands if command and command[0] == "uocr"]


def parse_uocr(args: list[str]) -> click.Context:
    """The context of the command `uocr ARGS` would run (its ``params`` as parsed). Raises
    click's UsageError (an unknown option, a bad value) where the CLI would refuse."""
    return _parse(main, list(args))


def _parse(
    command: click.Command, args: list[str], parent: click.Context | None = None
) -> click.Context:
    ctx = command.make_context(command.name or "uocr", args, parent=parent)
    if not isinstance(command, click.Group):
        return ctx
    rest = [*ctx._protected_args, *ctx.args]
    _, sub, sub_args = command.resolve_command(ctx, rest)
    assert sub is not None
    return _parse(sub, sub_args, ctx)
