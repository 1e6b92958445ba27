"""Which page-group tasks are waiting in the broker: what the reconciler compares Postgres with.

Only the ready lists count as "live". A message a worker has taken sits in kombu's ``unacked``
hash until it is acked, and stays there for the whole visibility timeout if that worker died
before claiming the group; so a pending group whose message is anywhere but the ready lists is
treated as lost, and dispatched again. A duplicate is harmless: claims are idempotent.
"""

from __future__ import annotations

import json
from typing import Protocol

import redis

from ocr_api.core.contracts import OCR_QUEUES

# kombu's Redis transport keeps a queue's messages of priority p > 0 in "<queue>\x06\x16<p>".
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (0, 3, 6, 9)
_CHUNK = 500


class WaitingTasks(Protocol):
    def task_ids(self) -> set[str]:
        """Ids of the page-group tasks waiting in the queues; raises if the broker is down."""
        ...


class RedisWaitingTasks:
    """Reads kombu's ready lists (JSON messages whose ``headers.id`` is the task id)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)

    def task_ids(self) -> set[str]:
        ids: set[str] = set()
        for queue in OCR_QUEUES:
            for key in _queue_keys(queue):
                ids.update(self._ids_in(key))
        return ids

    def _ids_in(self, key: str) -> set[str]:
        ids: set[str] = set()
        start = 0
        while chunk := self.client.lrange(key, start, start + _CHUNK - 1):
            ids.update(filter(None, (_task_id(raw) for raw in chunk)))
            start += _CHUNK
        return ids


def _queue_keys(queue: str) -> list[str]:
    return [queue if p == 0 else f"{queue}{_PRIORITY_SEPARATOR}{p}" for p in _PRIORITY_STEPS]


def _task_id(raw: bytes | str) -> str | None:
    try:
        return str(json.loads(raw)["headers"]["id"])
    except (ValueError, KeyError, TypeError):
        return None  # not a Celery message: nothing of ours
