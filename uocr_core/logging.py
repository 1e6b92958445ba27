"""JSON-lines logs through structlog; context (job_id, page_group, task_id) is bound per task.

Standard-library records (Celery's, uvicorn's, Flower's) go through the same renderer, so every
line a process writes is one JSON object carrying the bound context; a traceback, a warning and an
uncaught exception are one object each, never lines of text.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import MutableMapping
from types import TracebackType
from typing import Any

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    # The pid: which prefork child (or recycled successor) wrote the line.
    structlog.processors.CallsiteParameterAdder({structlog.processors.CallsiteParameter.PROCESS}),
]


def _access_fields(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """uvicorn's access line as fields too (client, method, path, status), not only text."""
    args = event_dict.pop("positional_args", None)  # the record's own, kept by the formatter
    record = event_dict.get("_record")
    access = record is not None and record.name == "uvicorn.access"
    if access and isinstance(args, tuple) and len(args) == 5:
        names = ("client", "method", "path", "http", "status")
        event_dict.update(zip(names, args, strict=True))
    return event_dict


def configure_logging(level: str = "info") -> None:
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*_SHARED, _access_fields],
            pass_foreign_args=True,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)  # 7 lines a start
    logging.captureWarnings(True)  # warnings.warn() text becomes a record like any other
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, error, traceback)
        return
    structlog.get_logger("uncaught").critical("process.crashed", exc_info=(kind, error, traceback))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    structlog.get_logger("uncaught").critical(
        "thread.crashed",
        thread=args.thread.name if args.thread else None,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
