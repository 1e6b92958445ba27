"""The long-running processes: the API, the workers, the scheduler and Flower. Each checks what
it needs before it starts and logs JSON lines from its first line."""

from __future__ import annotations

import os
import sys

import click

from uocr_cli.errors import CliError
from uocr_cli.preflight import require_broker, require_database


@click.command()
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="[default: service_port]")
@click.option(
    "--workers", type=click.IntRange(min=1), default=1, show_default=True, help="API processes."
)
def api(host: str, port: int | None, workers: int) -> None:
    """Serve the HTTP API (refuses a database it cannot reach or that is not migrated)."""
    import uvicorn

    from uocr_core.logging import configure_logging
    from uocr_core.settings import get_settings

    settings = get_settings()
    require_database(settings)
    configure_logging(settings.log_level)
    # An import string and a factory: each of several processes builds its own app (and
    # configures its logging in create_app); log_config=None lets uvicorn's loggers reach
    # the JSON handler instead of installing its own text formatters.
    uvicorn.run(
        "ocr_api.main:create_app",
        factory=True,
        host=host,
        port=port or settings.service_port,
        workers=workers,
        log_config=None,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )


@click.command()
@click.option("--gpus", default="none", show_default=True, help="'all', 'none', or cards like 0,1.")
@click.option("--queues", default=None, help="Comma-separated queues (default: the OCR queues).")
@click.option("--concurrency", default=1, show_default=True, help="CPU worker processes.")
@click.option("--beat", is_flag=True, help="Also run the scheduler (stale-group recovery).")
@click.option(
    "--model-version",
    default=None,
    help="The model version to serve: its engine and its queues (default: models.serve).",
)
def worker(
    gpus: str, queues: str | None, concurrency: int, beat: bool, model_version: str | None
) -> None:
    """Start Celery workers: one per GPU card, or one CPU worker. Each serves one model version,
    taking that version's OCR queues (--queues names the plain ones: ocr.long -> ocr.long.v2)."""
    from ocr_worker import launcher
    from uocr_cli.model import check_served_version
    from uocr_core.settings import get_settings

    settings = get_settings()
    served = model_version or settings.worker.model_version or settings.models.serve
    check_served_version(settings, served)
    try:
        cards = launcher.parse_gpus(gpus, launcher.detect_gpu_count())
    except ValueError as error:
        raise CliError(str(error)) from None
    require_broker(settings)
    require_database(settings)
    chosen = tuple(queues.split(",")) if queues else launcher.OCR_QUEUES
    extra = ("-B",) if beat else ()
    specs = launcher.worker_specs(
        cards,
        concurrency=concurrency,
        queues=chosen,
        extra_args=extra,
        gpu_concurrency=settings.gpu_worker_threads,
        model_version=served,
    )
    sys.exit(launcher.run_workers(specs))


@click.command()
@click.option(
    "--schedule",
    type=click.Path(dir_okay=False),
    default="celerybeat-schedule",
    show_default=True,
    help="Where the scheduler keeps its last run times.",
)
def beat(schedule: str) -> None:
    """Run the scheduler alone (one per deployment)."""
    from ocr_worker.launcher import CELERY_ARGV
    from uocr_core.settings import get_settings

    require_broker(get_settings())
    os.execv(sys.executable, [*CELERY_ARGV, "beat", "--schedule", schedule])


@click.command()
@click.option("--port", default=5555, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 in a container).",
)
@click.option(
    "--basic-auth",
    envvar="FLOWER_BASIC_AUTH",
    default=None,
    metavar="USER:PASSWORD",
    help="Credentials for the pages, the API and /metrics (or FLOWER_BASIC_AUTH).",
)
@click.option(
    "--unauthenticated", is_flag=True, help="Run open to anyone who can reach the address."
)
def flower(port: int, address: str, basic_auth: str | None, unauthenticated: bool) -> None:
    """Operators' console for the workers and their page-group tasks. Needs credentials
    unless run with --unauthenticated; listens on loopback unless --address says otherwise."""
    from uocr_cli.flower import FlowerOptions, run_flower
    from uocr_core.settings import get_settings

    settings = get_settings()
    options = FlowerOptions.checked(port, address, basic_auth, unauthenticated)
    require_broker(settings)
    sys.exit(run_flower(options, settings))
