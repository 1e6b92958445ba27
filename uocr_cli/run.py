"""``uocr run``: one document on this machine, no servers, with a progress bar by page."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from uocr_cli.errors import CliError
from uocr_cli.progress import progress_bar

if TYPE_CHECKING:
    from uocr_core.results.measure import Measure


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--pages", default=None, help="Page range, e.g. 1-3,7.")
@click.option("--chunk-chars", type=click.IntRange(100), help="chunks.jsonl: characters a chunk")
@click.option("--chunk-tokens", type=click.IntRange(16), help="chunks.jsonl: tokens a chunk")
@click.option(
    "--tokenizer",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the tokenizer.json whose tokens --chunk-tokens counts",
)
def run(
    file: Path,
    out_dir: Path,
    pages: str | None,
    chunk_chars: int | None,
    chunk_tokens: int | None,
    tokenizer: Path | None,
) -> None:
    """OCR FILE on this machine, no servers: writes result.json, result.md, result.txt,
    pages.jsonl, result.hocr, result.alto.xml, chunks.jsonl and result.pdf."""
    from ocr_worker.embedded import run_document
    from uocr_core.errors import DomainError
    from uocr_core.logging import configure_logging
    from uocr_core.settings import get_settings

    settings = get_settings()
    configure_logging("warning")
    size = _chunk_size(chunk_chars, chunk_tokens, tokenizer)
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
    if size is not None:
        _rechunk(out_dir, size)
    click.echo(
        f"{job.status}: {job.page_count} pages ({job.pages_failed} failed, "
        f"{job.pages_flagged} flagged) -> {out_dir}"
    )
    if job.pages_failed:
        sys.exit(2)


def _chunk_size(chars: int | None, tokens: int | None, tokenizer: Path | None) -> Measure | None:
    """The chunks' size asked for: None for the default (1,500 characters)."""
    from uocr_core.errors import DomainError
    from uocr_core.results import measure

    if chars is not None and (tokens is not None or tokenizer is not None):
        raise CliError("give --chunk-chars, or --chunk-tokens with --tokenizer: not both")
    if (tokens is None) != (tokenizer is None):
        raise CliError("--chunk-tokens and --tokenizer go together: how many, and whose tokens")
    if tokens is not None and tokenizer is not None:
        try:
            return measure.tokens(tokens, "--tokenizer", {"--tokenizer": tokenizer})
        except DomainError as error:  # not a tokenizer.json
            raise CliError(error.message) from None
    return measure.Chars(chars) if chars is not None else None


def _rechunk(out_dir: Path, size: Measure) -> None:
    """chunks.jsonl again at ``size``, from the pages just written (as the API does)."""
    from uocr_core.contracts import PageResult
    from uocr_core.results.chunks import write_chunks

    with (out_dir / "pages.jsonl").open(encoding="utf-8") as lines:
        pages = (PageResult.model_validate_json(line) for line in lines if line.strip())
        with (out_dir / "chunks.jsonl").open("w", encoding="utf-8") as out:
            write_chunks(pages, out, size)


def _require_writable(out_dir: Path) -> None:
    """Say at once, in one line, when --out cannot hold the results (before any OCR)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as error:
        problem = error.strerror or str(error)
        raise CliError(f"cannot write --out {out_dir}: {problem}") from error
