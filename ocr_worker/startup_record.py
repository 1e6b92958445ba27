"""A worker's start written to the audit log: which node, which queues, and the settings it
runs with (secrets redacted), so "what was that worker configured with last Tuesday" has an
answer after its logs are gone."""

from __future__ import annotations

import os

import structlog
from sqlalchemy.exc import SQLAlchemyError

from uocr_core import audit
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.redaction import redacted_settings
from uocr_core.settings import Settings

log = structlog.get_logger(__name__)


def record_worker_start(settings: Settings, *, node_name: str, queues: list[str]) -> bool:
    """True once recorded. A database that cannot take the row does not stop the worker (it
    retries its own work through outages): the failure is logged as an error instead."""
    # Its own engine, disposed at once: this runs in the parent before children are forked
    # again, and a pooled connection must not be inherited across a fork.
    engine = make_engine(settings.database)
    try:
        with transaction(make_session_factory(engine)) as session:
            audit.record(
                session,
                audit.Actor.worker(node_name),
                audit.Action.WORKER_STARTED,
                target=node_name,
                pid=os.getpid(),
                queues=sorted(queues),
                engine=settings.engine,
                settings=redacted_settings(settings),
            )
        return True
    except SQLAlchemyError as error:
        log.error("audit.worker_start_not_recorded", node=node_name, error=str(error))
        return False
    finally:
        engine.dispose()
