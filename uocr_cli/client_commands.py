"""``uocr submit``, ``uocr status``, ``uocr fetch``: the service from a shell, through the API
(``UOCR_URL``, ``UOCR_API_KEY``). Safe to re-run: nothing is submitted twice."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from uocr_cli.errors import CliError
from uocr_cli.progress import progress_bar

FORMATS = ("json", "markdown", "text", "hocr", "alto", "chunks", "pdf")


@contextmanager
def _client() -> Iterator[Any]:
    """The API client, with its failures as one line each."""
    import httpx

    from uocr_client import ApiError, UocrClient

    try:
        with UocrClient.from_env() as client:
            yield client
    except ValueError as error:
        raise CliError(str(error)) from None
    except ApiError as error:
        raise CliError(str(error)) from None
    except httpx.TransportError as error:
        raise CliError(f"cannot reach the API (UOCR_URL): {error}") from None


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-r", "--recursive", is_flag=True, help="Take documents in sub-folders too.")
@click.option("--batch", "batch_name", default=None, help="Batch name (default: from PATHS).")
@click.option("--pages", default=None, help="Page range of each document, e.g. 1-3,7.")
@click.option("--priority", type=click.Choice(["interactive", "backlog"]), default="backlog")
@click.option("--metadata", default=None, help="A JSON object kept with each document.")
@click.option("--reuse", is_flag=True, help="Take the results of documents read before.")
@click.option("--webhook-url", default=None, help="One signed event when the batch ends.")
@click.option("--parallel", default=4, show_default=True, help="Uploads at once.")
@click.option("--wait", is_flag=True, help="Follow the batch until every document settles.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path))
def submit(
    paths: tuple[Path, ...],
    recursive: bool,
    batch_name: str | None,
    pages: str | None,
    priority: str,
    metadata: str | None,
    reuse: bool,
    webhook_url: str | None,
    parallel: int,
    wait: bool,
    out_dir: Path | None,
) -> None:
    """Submit PDFs and page images (files or folders) as one batch: uploaded straight to object
    storage, each added once. Interrupted? Run the same command again."""
    from uocr_client.archive import collect, fetch_batch, submit_archive

    try:
        files = collect(paths, recursive=recursive)
    except ValueError as error:  # two files under one name: their results would collide
        raise CliError(f"{error}: give them different names") from None
    if not files:
        raise CliError("no PDF or page image (.pdf .png .jpg .jpeg .tif .tiff) in the paths given")
    options = {
        "pages": pages,
        "priority": priority,
        "metadata": _metadata(metadata),
        "reuse_results": reuse or None,
    }
    batch_options = {"webhook_url": webhook_url} if webhook_url else {}
    name = batch_name or _default_name(paths)
    with _client() as client, progress_bar() as progress:
        uploads = progress.add_task("upload (files)", total=len(files))
        try:
            submitted = submit_archive(
                client,
                files,
                batch_name=name,
                options={k: v for k, v in options.items() if v is not None},
                batch_options=batch_options,
                parallel=parallel,
                on_file=lambda _: progress.advance(uploads),
            )
        except KeyboardInterrupt:
            raise CliError("interrupted: run the same command again to go on") from None
        progress.update(uploads, completed=len(files))
        batch = submitted.batch
        click.echo(
            f"batch {batch.id} ({name}): {submitted.uploaded} uploaded, "
            f"{submitted.skipped} already there"
        )
        if wait or out_dir:
            batch = _follow(client, batch.id, progress)
    if out_dir:
        with _client() as client:
            written, missing = fetch_batch(client, batch.id, out_dir, ("json", "markdown"))
        click.echo(f"{written} files under {out_dir}; {len(missing)} documents without a result")
    if wait or out_dir:
        click.echo(_batch_line(batch))


@click.command()
@click.argument("batch_or_job_id")
def status(batch_or_job_id: str) -> None:
    """The state of a batch or a job."""
    from uocr_client import ApiError

    with _client() as client:
        try:
            batch = client.batch(batch_or_job_id)
        except ApiError as error:
            if error.status != 404:
                raise
            job = client.job(batch_or_job_id)
            click.echo(
                f"job {job.id} {job.status}: {job.pages_done}/{job.pages_total} pages "
                f"({job.pages_failed} failed, {job.pages_flagged} flagged) {job.source}"
            )
            return
        click.echo(_batch_line(batch))


@click.command()
@click.argument("batch_or_job_id")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format",
    "formats",
    default="json,markdown",
    show_default=True,
    help=f"Comma-separated, of: {', '.join(FORMATS)}.",
)
@click.option(
    "--review",
    is_flag=True,
    help="Write a batch's pages to review (review.jsonl), not its results (a batch id only).",
)
def fetch(batch_or_job_id: str, out_dir: Path, formats: str, review: bool) -> None:
    """Write the results under OUT, each under its input file's name."""
    from uocr_client import ApiError
    from uocr_client.archive import fetch_batch, output_path

    if review:
        _fetch_review(batch_or_job_id, out_dir)
        return
    chosen = tuple(f.strip() for f in formats.split(",") if f.strip())
    if unknown := [f for f in chosen if f not in FORMATS]:
        raise CliError(f"unknown format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    with _client() as client:
        try:
            written, missing = fetch_batch(client, batch_or_job_id, out_dir, chosen)
        except ApiError as error:
            if error.status != 404:
                raise
            job = client.job(batch_or_job_id)
            for fmt in chosen:
                target = output_path(out_dir, job.source, fmt)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(client.result(job.id, fmt))
            written, missing = len(chosen), []
    click.echo(f"{written} files under {out_dir}; {len(missing)} documents without a result")


def _fetch_review(batch_id: str, out_dir: Path) -> None:
    """The batch's pages worth a look, oldest first, a JSON object a line: what a reviewer
    opens in the morning (each names the document, the page, why, and where to mark it)."""
    from uocr_client import ApiError

    with _client() as client:
        try:
            client.batch(batch_id)  # a 404 names the batch, not an empty list
        except ApiError as error:
            if error.status == 404:
                raise CliError(f"no batch {batch_id}: --review takes a batch id") from None
            raise
        pages = list(client.review(batch_id=batch_id))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "review.jsonl"
    lines = [page.model_dump_json() + "\n" for page in pages]
    target.write_text("".join(lines), encoding="utf-8")
    click.echo(f"{len(pages)} pages to review in {target}")


def _follow(client: Any, batch_id: str, progress: Any) -> Any:
    import time

    pages = progress.add_task("OCR (pages)", total=None)
    while True:
        batch = client.batch(batch_id)
        settled = batch.pages.done + batch.pages.failed
        progress.update(pages, completed=settled, total=max(batch.pages.total, settled) or None)
        if batch.status not in ("open", "running"):
            return batch
        time.sleep(1.0)


def _batch_line(batch: Any) -> str:
    d = batch.documents
    return (
        f"batch {batch.id} {batch.status}: {d.succeeded} succeeded, {d.failed} failed, "
        f"{d.canceled} canceled, {d.running + d.queued} running, {d.waiting} waiting of {d.total}; "
        f"pages {batch.pages.done}/{batch.pages.total} ({batch.pages.failed} failed, "
        f"{batch.pages.flagged} flagged)"
    )


def _default_name(paths: tuple[Path, ...]) -> str:
    """The same PATHS name the same batch, so a re-run resumes it."""
    resolved = sorted(str(p.resolve()) for p in paths)
    digest = hashlib.sha256("\n".join(resolved).encode()).hexdigest()[:12]
    return f"{Path(resolved[0]).name} ({digest})"


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CliError(f"--metadata is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise CliError("--metadata must be a JSON object")
    return value
