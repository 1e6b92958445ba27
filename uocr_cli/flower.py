"""Flower in this process: JSON logs from its first line, credentials required (``/metrics``
included), loopback unless told otherwise."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import structlog

from uocr_cli.errors import CliError
from uocr_core.settings import Settings


@dataclass(frozen=True)
class FlowerOptions:
    port: int
    address: str
    basic_auth: str | None  # "user:password[,user2:password2]"; None: run open

    @classmethod
    def checked(
        cls, port: int, address: str, basic_auth: str | None, unauthenticated: bool
    ) -> FlowerOptions:
        if unauthenticated and basic_auth:
            raise CliError(
                "give credentials (--basic-auth, FLOWER_BASIC_AUTH) or --unauthenticated, not both"
            )
        if not unauthenticated and not basic_auth:
            raise CliError(
                "Flower needs credentials: set FLOWER_BASIC_AUTH=user:password (or "
                "--basic-auth user:password), or run it open with --unauthenticated"
            )
        for credential in basic_auth.split(",") if basic_auth else []:
            user, _, password = credential.partition(":")
            if not user or not password:
                raise CliError("--basic-auth (FLOWER_BASIC_AUTH) takes user:password")
        return cls(port, address, basic_auth)


def run_flower(options: FlowerOptions, settings: Settings) -> int:
    """Run Flower until it stops; returns its exit code."""
    from celery.bin.celery import celery

    from uocr_core.logging import configure_logging

    configure_logging(settings.log_level)  # before tornado: it then adds no text handler
    import ocr_worker.tasks  # noqa: F401 - the app celery loads; a failure is ours to tell

    _metrics_need_credentials()
    # Flower reads these itself; the password stays out of the process's arguments.
    os.environ.pop("FLOWER_BASIC_AUTH", None)
    os.environ.pop("FLOWER_UNAUTHENTICATED_API", None)
    if options.basic_auth:
        os.environ["FLOWER_BASIC_AUTH"] = options.basic_auth
    else:
        os.environ["FLOWER_UNAUTHENTICATED_API"] = "true"  # its JSON API as open as its pages
    structlog.get_logger("uocr.flower").info(
        "flower.starting",
        address=options.address,
        port=options.port,
        auth="basic" if options.basic_auth else "none",
    )
    argv = ["-A", "ocr_worker.tasks", "--quiet", "flower"]
    argv += [f"--port={options.port}", f"--address={options.address}", "--logging=none"]
    try:
        celery.main(args=argv, prog_name="celery", standalone_mode=False)
    except SystemExit as stopped:
        return int(stopped.code or 0)
    return 0


def _metrics_need_credentials() -> None:
    """Flower 2 serves /metrics to anyone, even with basic auth on: ask like every page does."""
    import tornado.web
    from flower.views.monitor import Metrics

    serve = Metrics.get
    if getattr(serve, "needs_credentials", False):
        return

    async def guarded(self: Any, *args: Any, **kwargs: Any) -> None:
        if not self.current_user:  # with basic auth set, a wrong or missing one raises 401
            raise tornado.web.HTTPError(401)
        await serve(self, *args, **kwargs)

    guarded.needs_credentials = True  # type: ignore[attr-defined]
    Metrics.get = guarded  # type: ignore[method-assign]
