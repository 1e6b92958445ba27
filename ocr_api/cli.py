"""The ``uocr`` command. Each subcommand imports only what it runs (the API never loads torch)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from ocr_api.core.settings import Settings, SettingsError, get_settings

T = TypeVar("T")


def _settings() -> Settings:
    try:
        return get_settings()
    except SettingsError as error:
        raise click.ClickException(str(error)) from None


@click.group()
def main() -> None:
    """uocr: batch OCR for long documents."""


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--pages", default=None, help="Page range, e.g. 1-3,7.")
def run(file: Path, out_dir: Path, pages: str | None) -> None:
    """OCR FILE on this machine, no servers: writes result.json, result.md, pages.jsonl,
    result.pdf and result.hocr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from ocr_api.core.errors import DomainError
    from ocr_api.core.logging import configure_logging
    from ocr_worker.embedded import run_document

    settings = _settings()
    configure_logging("warning")
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as progress:
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
            raise click.ClickException(error.message) from None
    click.echo(f"{job.status}: {job.page_count} pages ({job.pages_failed} failed) -> {out_dir}")
    if job.pages_failed:
        sys.exit(2)


@main.command()
@click.option("--host", default="0.0.0.0")
def api(host: str) -> None:
    """Serve the HTTP API on service_port."""
    import uvicorn

    from ocr_api.main import create_app

    settings = _settings()
    uvicorn.run(
        create_app(settings),
        host=host,
        port=settings.service_port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )


@main.command()
@click.option("--gpus", default="none", show_default=True, help="'all', 'none', or cards like 0,1.")
@click.option("--queues", default=None, help="Comma-separated queues (default: the OCR queues).")
@click.option("--concurrency", default=1, show_default=True, help="CPU worker processes.")
@click.option("--beat", is_flag=True, help="Also run the scheduler (stale-group recovery).")
def worker(gpus: str, queues: str | None, concurrency: int, beat: bool) -> None:
    """Start Celery workers: one per GPU card, or one CPU worker."""
    from ocr_worker import launcher

    settings = _settings()
    try:
        cards = launcher.parse_gpus(gpus, launcher.detect_gpu_count())
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    chosen = tuple(queues.split(",")) if queues else launcher.OCR_QUEUES
    extra = ("-B",) if beat else ()
    specs = launcher.worker_specs(
        cards,
        concurrency=concurrency,
        queues=chosen,
        extra_args=extra,
        gpu_concurrency=settings.max_concurrency,
    )
    sys.exit(launcher.run_workers(specs))


@main.command()
def beat() -> None:
    """Run the scheduler alone (one per deployment)."""
    from ocr_worker.launcher import CELERY_ARGV

    os.execv(sys.executable, [*CELERY_ARGV, "beat"])


@main.command()
@click.option("--port", default=5555, show_default=True)
def flower(port: int) -> None:
    """Operators' console for the workers and their page-group tasks."""
    from ocr_worker.launcher import CELERY_ARGV

    _settings()
    os.execv(sys.executable, [*CELERY_ARGV, "flower", f"--port={port}"])


@main.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Apply the Alembic migrations."""
    from ocr_api.core.migrate import upgrade as apply

    apply(_settings().database.url)
    click.echo("database at head")


@main.group()
def keys() -> None:
    """API keys."""


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant name; created if new.")
def keys_create(tenant: str) -> None:
    """Create an API key (shown once; stored hashed)."""
    from ocr_api.core.db import make_engine, make_session_factory, transaction
    from ocr_api.core.tenants import create_key

    sessions = make_session_factory(make_engine(_settings().database))
    with transaction(sessions) as session:
        created = create_key(session, tenant_name=tenant)
    click.echo(f"tenant_id={created.tenant_id}")
    click.echo(f"api_key={created.api_key}")
    click.echo(f"webhook_secret={created.webhook_secret}")


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
def keys_list(tenant: str | None) -> None:
    """List keys by prefix (the keys themselves are not stored)."""
    from ocr_api.core.db import make_engine, make_session_factory
    from ocr_api.core.tenants import list_keys

    with make_session_factory(make_engine(_settings().database))() as session:
        for key in list_keys(session, tenant_name=tenant):
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            click.echo(f"{key.prefix}  {key.tenant_name}  {key.created_at:%Y-%m-%d %H:%M}  {state}")


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key starting with PREFIX (its first 12 characters, as `keys list` shows)."""
    from ocr_api.core.db import make_engine, make_session_factory, transaction
    from ocr_api.core.errors import NotFound
    from ocr_api.core.tenants import revoke_key

    sessions = make_session_factory(make_engine(_settings().database))
    try:
        with transaction(sessions) as session:
            key = revoke_key(session, prefix)
    except NotFound as error:
        raise click.ClickException(error.message) from None
    click.echo(f"revoked {key.prefix} of tenant {key.tenant_name}")


@main.group()
def storage() -> None:
    """Object storage."""


@storage.command("init")
def storage_init() -> None:
    """Create the bucket if it does not exist."""
    from ocr_api.core.storage import S3ObjectStore

    S3ObjectStore(_settings().s3).ensure_bucket()
    click.echo("bucket ready")


@main.group()
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
        raise click.ClickException(str(error)) from None


@main.group()
def webhooks() -> None:
    """Webhook dead letters: deliveries that ran out of retries or were refused."""


@webhooks.command("failed")
@click.option("--tenant", default=None, help="Only this tenant's deliveries.")
def webhooks_failed(tenant: str | None) -> None:
    """List failed deliveries with their last answer."""
    from ocr_api.core.db import make_engine, make_session_factory
    from ocr_api.webhooks.dead_letters import dead_letters

    with make_session_factory(make_engine(_settings().database))() as session:
        for letter in dead_letters(session, tenant_name=tenant):
            answer = letter.last_status_code or letter.last_error
            click.echo(
                f"{letter.delivery_id}  job={letter.job_id}  {letter.tenant_name}  "
                f"{letter.event_type}  attempts={letter.attempts}  last={answer}  {letter.url}"
            )


@webhooks.command("resend")
@click.argument("delivery_ids", nargs=-1)
@click.option("--all-failed", is_flag=True, help="Every failed delivery (of --tenant).")
@click.option("--tenant", default=None, help="With --all-failed: only this tenant's.")
def webhooks_resend(delivery_ids: tuple[str, ...], all_failed: bool, tenant: str | None) -> None:
    """Send failed deliveries again: the same event, a fresh set of retries."""
    from ocr_api.core.celery_app import make_celery
    from ocr_api.core.db import make_engine, make_session_factory, transaction
    from ocr_api.core.dispatch import CeleryDispatcher
    from ocr_api.core.errors import InvalidRequest
    from ocr_api.webhooks.dead_letters import dead_letters, mark_for_resend

    settings = _settings()
    if bool(delivery_ids) == all_failed:
        raise click.UsageError("give delivery ids or --all-failed, not both or neither")
    sessions = make_session_factory(make_engine(settings.database))
    try:
        with transaction(sessions) as session:
            ids = list(delivery_ids) or [
                d.delivery_id for d in dead_letters(session, tenant_name=tenant)
            ]
            resent = mark_for_resend(session, ids)
    except InvalidRequest as error:
        raise click.ClickException(str(error)) from None
    dispatcher = CeleryDispatcher(make_celery(settings), settings.group_time_limit)
    for delivery_id in resent:
        dispatcher.enqueue_webhook(delivery_id=delivery_id)
        click.echo(f"resent {delivery_id}")


if __name__ == "__main__":
    main()
