"""``uocr model``: the GPU engine's weights, checked before a worker loads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from uocr_cli.errors import CliError

if TYPE_CHECKING:
    from uocr_core.settings import Settings

T = TypeVar("T")


@click.group()
def model() -> None:
    """Model weights."""


@model.command("manifest")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def model_manifest(path: Path) -> None:
    """Record the sha256 of every weight, config and tokenizer file in PATH."""
    from ocr_worker.engines.unlimited_ocr.model.manifest import write_manifest

    click.echo(f"wrote {_manifest_step(write_manifest, path)}")


@model.command("verify")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def model_verify(path: Path) -> None:
    """Check PATH against its manifest; refuses a partial or corrupt download."""
    from ocr_worker.engines.unlimited_ocr.model.manifest import verify_manifest

    click.echo(f"{_manifest_step(verify_manifest, path)} files verified")


def _manifest_step(step: Callable[[Path], T], path: Path) -> T:
    """Run a manifest step; its error becomes the command's message, naming the file."""
    from ocr_worker.engines.unlimited_ocr.model.manifest import ManifestError

    try:
        return step(path)
    except ManifestError as error:
        raise CliError(str(error)) from None


def check_served_version(settings: Settings, name: str) -> None:
    """Refuse to start a worker for an unknown version, or on weights its manifest pin does not
    match (one line naming the version and the file)."""
    from ocr_worker.engines.unlimited_ocr.model.manifest import ManifestError, check_pinned_manifest
    from uocr_core import model_versions

    try:
        chosen = model_versions.version(settings, name)
    except KeyError as error:
        raise CliError(f"--model-version: {error.args[0]}") from None
    if chosen.manifest_sha256 is None or chosen.model_path is None:
        return
    try:
        check_pinned_manifest(chosen.model_path, chosen.manifest_sha256)
    except ManifestError as error:
        raise CliError(f"model version {name!r}: {error}") from None
