"""``uocr model``: the GPU engine's weights, checked before a worker loads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from uocr_cli.errors import CliError

T = TypeVar("T")


@click.group()
def model() -> None:
    """Model weights."""


@model.command("manifest")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def model_manifest(path: Path) -> None:
    """Record the sha256 of every weight, config and tokenizer file in PATH."""
    from ocr_worker.engines.unlimited_ocr.manifest import write_manifest

    click.echo(f"wrote {_manifest_step(write_manifest, path)}")


@model.command("verify")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def model_verify(path: Path) -> None:
    """Check PATH against its manifest; refuses a partial or corrupt download."""
    from ocr_worker.engines.unlimited_ocr.manifest import verify_manifest

    click.echo(f"{_manifest_step(verify_manifest, path)} files verified")


def _manifest_step(step: Callable[[Path], T], path: Path) -> T:
    """Run a manifest step; its error becomes the command's message, naming the file."""
    from ocr_worker.engines.unlimited_ocr.manifest import ManifestError

    try:
        return step(path)
    except ManifestError as error:
        raise CliError(str(error)) from None
