"""``uocr run``: one document on this machine, no servers, with a progress bar by page."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from uocr_cli.errors import CliError
from uocr_cli.progress import progress_bar


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--pages", default=None, help="Page range, e.g. 1-3,7.")
def run(file: Path, out_dir: Path, pages: str | None) -> None:
    """OCR FILE on this machine, no servers: writes result.json, result.md, pages.jsonl,
    result.pdf and result.hocr."""
    from ocr_worker.embedded import run_document
    from uocr_core.errors import DomainError
    from uocr_core.logging import configure_logging
    from uocr_core.settings import get_settings

    settings = get_settings()
    configure_logging("warning")
    _require_writable(out_dir)
    with progress_bar() as progress:
        task = progress.add_task(f"OCR {file.name} (pages)", total=None)
        try:
            job = run_document(
                file,
                out_dir,
                settings,
                pages=pages,
                on_progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
        except DomainError as error:
            raise CliError(error.message) from None
    click.echo(
        f"{job.status}: {job.page_count} pages ({job.pages_failed} failed, "
        f"{job.pages_flagged} flagged) -> {out_dir}"
    )
    if job.pages_failed:
        sys.exit(2)


def _require_writable(out_dir: Path) -> None:
    """Say at once, in one line, when --out cannot hold the results (before any OCR)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as error:
        problem = error.strerror or str(error)
        raise CliError(f"cannot write --out {out_dir}: {problem}") from error
