"""Errors that mean "a dependency is down for now", not "this request or document is bad".

Tasks retry them with backoff and the API answers them with 503 and ``Retry-After``; anything
else is a bug or a bad input and is handled as such.
"""

from __future__ import annotations

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc

from uocr_core.storage import StorageUnavailable

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    sqlalchemy.exc.OperationalError,  # Postgres down, restarting, or the connection dropped
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,  # the pool had no connection to give in time
    kombu.exceptions.OperationalError,  # the broker refused or dropped a publish
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    StorageUnavailable,  # the object store down, restarting, or answering 5xx
)


def is_transient(error: BaseException) -> bool:
    if isinstance(error, sqlalchemy.exc.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, TRANSIENT_ERRORS)
