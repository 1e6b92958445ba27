"""The Celery application shared by the API (which sends tasks by name) and the workers."""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from uocr_core.contracts import (
    QUEUE_BACKLOG,
    QUEUE_CONTROL,
    QUEUE_INTERACTIVE,
    QUEUE_LONG,
    TASK_ADMIT,
    TASK_DELIVER_WEBHOOK,
    TASK_PURGE_EXPIRED,
    TASK_RECOVER,
    TASK_SWEEP_ORPHANS,
)
from uocr_core.settings import Settings


def make_celery(settings: Settings) -> Celery:
    app = Celery("uocr", broker=settings.redis.url, backend=settings.redis.url)
    # Redis redelivers an unacked task after the visibility timeout: keep it above the longest
    # page group's hard limit, or a slow group would run twice at once.
    visibility = settings.max_group_time_limit * 2 + 60
    exchange = Exchange("uocr", type="direct")
    app.conf.update(
        task_queues=[
            Queue(QUEUE_INTERACTIVE, exchange, routing_key=QUEUE_INTERACTIVE),
            Queue(QUEUE_LONG, exchange, routing_key=QUEUE_LONG),
            Queue(QUEUE_BACKLOG, exchange, routing_key=QUEUE_BACKLOG),
            Queue(QUEUE_CONTROL, exchange, routing_key=QUEUE_CONTROL),
        ],
        task_default_queue=QUEUE_BACKLOG,
        task_default_exchange="uocr",
        task_routes={
            TASK_DELIVER_WEBHOOK: {"queue": QUEUE_CONTROL},
            TASK_RECOVER: {"queue": QUEUE_CONTROL},
            TASK_PURGE_EXPIRED: {"queue": QUEUE_CONTROL},
            TASK_SWEEP_ORPHANS: {"queue": QUEUE_CONTROL},
            TASK_ADMIT: {"queue": QUEUE_CONTROL},
        },
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # A worker takes a message only when a slot is free to run it, and then claims the
        # group within milliseconds: so a message out of the ready list whose group is still
        # pending after the reconciler's grace belongs to a dead worker
        # (ocr_worker/upkeep/reconciler.py).
        worker_disable_prefetch=True,
        # Checked by the prefork pool after each task (acked by then: nothing is lost).
        worker_max_memory_per_child=settings.worker.max_memory_per_child_mb * 1024 or None,
        task_track_started=True,
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # A worker on several queues takes from the first with work, in the order above (and
        # of -Q): an interactive job waits for at most the group in hand, not a backlog's turn.
        broker_transport_options={
            "visibility_timeout": visibility,
            "queue_order_strategy": "priority",
        },
        result_backend_transport_options={"visibility_timeout": visibility},
        worker_hijack_root_logger=False,
        beat_schedule={
            # Lapsed leases and work with no live task (see ocr_worker/upkeep/reconciler.py).
            "recover-stale-groups": {
                "task": TASK_RECOVER,
                "schedule": min(
                    settings.worker.reconcile_interval_seconds, settings.worker.lease_seconds / 2
                ),
                "options": {"queue": QUEUE_CONTROL},
            },
            # Waiting work into the broker as the window frees; settled batches finished.
            "admit-waiting": {
                "task": TASK_ADMIT,
                "schedule": settings.admission.interval_seconds,
                "options": {"queue": QUEUE_CONTROL, "expires": settings.admission.interval_seconds},
            },
            "purge-expired-results": {
                "task": TASK_PURGE_EXPIRED,
                "schedule": 3600.0,
                "options": {"queue": QUEUE_CONTROL},
            },
            "sweep-orphan-objects": {
                "task": TASK_SWEEP_ORPHANS,
                "schedule": 3600.0,
                "options": {"queue": QUEUE_CONTROL},
            },
        },
    )
    return app
