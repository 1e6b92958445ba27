"""Thin Celery tasks: they take ids, bind log context, and call the pipeline or the sender.

Import this module (``celery -A ocr_worker.tasks``) to get the app with its tasks registered.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import structlog
from celery import Task, signals
from celery.apps import worker as celery_worker_program
from celery.exceptions import SoftTimeLimitExceeded

from ocr_worker import metrics_server
from ocr_worker.broker_queues import RedisWaitingTasks
from ocr_worker.heap import return_freed_buffers
from ocr_worker.runtime import WorkerRuntime
from ocr_worker.startup_record import record_worker_start
from ocr_worker.upkeep.orphans import sweep_orphan_objects
from ocr_worker.upkeep.reconciler import Reconciler
from ocr_worker.upkeep.recovery import recover_stale_groups
from ocr_worker.upkeep.retention import purge_expired_results
from uocr_core import model_versions
from uocr_core.batches.completion import finish_settled_batches
from uocr_core.celery_app import make_celery
from uocr_core.contracts import (
    TASK_ADMIT,
    TASK_DELIVER_WEBHOOK,
    TASK_PAGE_GROUP,
    TASK_PURGE_EXPIRED,
    TASK_RECOVER,
    TASK_SWEEP_ORPHANS,
)
from uocr_core.jobs import admission_service
from uocr_core.logging import configure_logging
from uocr_core.settings import get_settings
from uocr_core.transient import TRANSIENT_ERRORS
from uocr_core.webhooks.sender import attempt_delivery

deployment = get_settings()
# This worker serves one model version: its queues, its engine (uocr worker --model-version).
served_version = model_versions.served_version(deployment)
settings = model_versions.settings_for(deployment, served_version)
app = make_celery(settings)
log = structlog.get_logger(__name__)


class _Process:
    """Per-process runtime: Celery forks children; CUDA and DB pools must not cross a fork."""

    runtime: WorkerRuntime | None = None
    lock = threading.Lock()  # a threads pool may ask for it from several threads at once

    @classmethod
    def get(cls) -> WorkerRuntime:
        with cls.lock:
            if cls.runtime is None:
                cls.runtime = WorkerRuntime.build(settings, app, served_version)
            return cls.runtime


@signals.setup_logging.connect
def _setup_logging(**_: Any) -> None:
    configure_logging(settings.log_level)


@signals.celeryd_init.connect
def _json_from_the_first_line(**_: Any) -> None:
    """The worker warns (e.g. when run as root) before its logging is set up, and says
    "worker: Warm shutdown" straight to stdout: both become JSON lines too."""
    configure_logging(settings.log_level)
    celery_worker_program.safe_say = _say
    chosen = model_versions.version(deployment, served_version)
    log.info(
        "worker.model_version",
        model_version=served_version,
        engine=chosen.engine,
        model_path=str(chosen.model_path) if chosen.model_path else None,
        manifest_sha256=chosen.manifest_sha256,
    )


def _say(message: str, *_: Any) -> None:
    structlog.get_logger("celery.apps.worker").info(message.strip())


@signals.worker_init.connect
def _serve_metrics(**_: Any) -> None:
    """In the main process, before the pool forks (and before any metric is built)."""
    if settings.worker.metrics_port is not None:
        directory = metrics_server.enable_multiprocess_values()
        metrics_server.serve_worker_metrics(settings, directory)


@signals.worker_shutdown.connect
def _remove_metrics(**_: Any) -> None:
    if directory := os.environ.get(metrics_server.MULTIPROC_ENV):
        metrics_server.remove_values(directory)


@signals.worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    if _Process.runtime is not None:
        _Process.runtime.close()
    metrics_server.forget_process(os.getpid())


@signals.worker_process_init.connect
def _load_in_child(**_: Any) -> None:
    if settings.worker.pool == "prefork":
        _preload()


@signals.worker_ready.connect
def _load_in_threads_worker(**_: Any) -> None:
    if settings.worker.pool == "threads":  # no fork: the worker's own process runs the tasks
        return_freed_buffers()  # before its threads hold pages: no arena keeps their peak
        _preload()


@signals.worker_ready.connect
def _record_start(sender: Any = None, **_: Any) -> None:
    """Once per worker node, in its main process: the audit log's worker.started row."""
    queues = list(app.amqp.queues.consume_from or app.amqp.queues)
    record_worker_start(settings, node_name=str(getattr(sender, "hostname", "")), queues=queues)


def _preload() -> None:
    runtime = _Process.get()
    if settings.worker.preload_engine:
        runtime.pipeline  # noqa: B018 - load the engine now, not on the first task
        log.info("worker.ready", engine=settings.engine, model_version=served_version)


# Database and broker errors are retried with backoff: a new message, so nothing is acked as
# done. If even that publish fails (the broker is down) the message is dropped, and the
# reconciler dispatches the group again from Postgres once the broker is back.
@app.task(
    name=TASK_PAGE_GROUP,
    bind=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=settings.worker.transient_retry_max_seconds,
    retry_jitter=True,
    max_retries=settings.worker.transient_max_retries,
)
def page_group(self: Task, job_id: str, group_index: int) -> str:
    structlog.contextvars.bind_contextvars(
        job_id=job_id, page_group=group_index, task_id=self.request.id
    )
    try:
        return _Process.get().pipeline.run(job_id, group_index)
    except SoftTimeLimitExceeded:
        log.error("page_group.time_limit")
        raise  # the lease lapses and recovery re-queues it, counting the attempt
    finally:
        structlog.contextvars.clear_contextvars()


@app.task(name=TASK_RECOVER)
def recover() -> list[str]:
    """Groups whose worker died mid-way (lapsed lease), then work with no live task."""
    runtime = _Process.get()
    reconciler = Reconciler(
        runtime.sessions,
        runtime.dispatcher,
        RedisWaitingTasks(settings.redis.url),
        redispatch_after_seconds=settings.worker.redispatch_after_seconds,
        parallel_groups=settings.page_groups_in_parallel,
        parallel_by_engine={
            engine: model_versions.groups_in_parallel(deployment, engine)
            for engine in ("rapidocr", "unlimited_ocr", "simulated")
        },
        known_versions=frozenset(model_versions.version_names(deployment)),
        webhook_quiet_seconds=settings.webhooks.backoff_max_seconds
        + settings.webhooks.timeout_seconds
        + settings.worker.redispatch_after_seconds,
    )
    return recover_stale_groups(runtime.sessions, runtime.dispatcher) + reconciler.run()


@app.task(name=TASK_ADMIT)
def admit_waiting() -> int:
    """The feeder: waiting jobs into the broker as the window frees; settled batches end."""
    r = _Process.get()
    admitted = admission_service.admit_waiting(
        sessions=r.sessions, store=r.store, dispatcher=r.dispatcher, settings=settings
    )
    finish_settled_batches(
        sessions=r.sessions, store=r.store, dispatcher=r.dispatcher, settings=settings
    )
    return admitted


@app.task(name=TASK_PURGE_EXPIRED)
def purge_expired() -> list[str]:
    runtime = _Process.get()
    return purge_expired_results(
        runtime.sessions, runtime.store, retention_days=settings.result_retention_days
    )


@app.task(name=TASK_SWEEP_ORPHANS)
def sweep_orphans() -> int:
    runtime = _Process.get()
    return len(
        sweep_orphan_objects(
            runtime.sessions,
            runtime.store,
            grace_hours=settings.orphan_grace_hours,
            inbox_retention_hours=settings.inbox_retention_hours,
        )
    )


@app.task(name=TASK_DELIVER_WEBHOOK, bind=True)
def deliver_webhook(self: Task, delivery_id: str) -> str:
    structlog.contextvars.bind_contextvars(delivery_id=delivery_id, task_id=self.request.id)
    try:
        runtime = _Process.get()
        outcome = attempt_delivery(
            runtime.sessions, runtime.http, settings.webhooks, delivery_id=delivery_id
        )
        if outcome.retry_in_seconds is not None:
            # A new message rather than self.retry: the count lives in Postgres, not the message.
            runtime.dispatcher.enqueue_webhook(
                delivery_id=delivery_id, countdown=outcome.retry_in_seconds
            )
        return outcome.status
    finally:
        structlog.contextvars.clear_contextvars()
