"""The ``uocr`` group: global options, failure handling, and every command registered."""

from __future__ import annotations

import traceback
from typing import Any

import click

from uocr_cli import admin, audit, client_commands, evaluate, model, run, serve, webhooks
from uocr_cli.errors import CliError, describe_failure

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class UocrGroup(click.Group):
    """Turns a failure escaping any command into one line on stderr and exit code 1; with
    ``--debug`` the traceback is shown instead."""

    def invoke(self, ctx: click.Context) -> Any:
        debug = bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except CliError as error:
            if debug and error.__cause__ is not None:
                traceback.print_exception(error.__cause__)
            raise
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            if debug:
                raise
            raise CliError(describe_failure(error)) from None


@click.group("uocr", cls=UocrGroup, context_settings=CONTEXT_SETTINGS)
@click.option("--debug", is_flag=True, help="Show the traceback of a failure.")
def main(debug: bool) -> None:
    """uocr: batch OCR for long documents."""


for command in (
    run.run,
    evaluate.eval_command,
    serve.api,
    serve.worker,
    serve.beat,
    serve.flower,
    admin.db,
    admin.keys,
    admin.storage,
    audit.audit,
    webhooks.webhooks,
    model.model,
    client_commands.submit,
    client_commands.status,
    client_commands.fetch,
):
    main.add_command(command)


def _with_version(command: click.Command) -> None:
    """``--version`` answers on the group and on every command under it."""
    click.version_option(package_name="uocr")(command)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_version(sub)


_with_version(main)

if __name__ == "__main__":
    main()
