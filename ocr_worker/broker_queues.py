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

from uocr_core.contracts import OCR_QUEUES

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
        for key in self._ready_lists():
            ids.update(self._ids_in(key))
        return ids

    def _ready_lists(self) -> set[bytes]:
        r"""Every OCR queue's ready lists: each model version's (ocr.interactive.<version>),
        those of versions no longer in the settings included, and kombu's per-priority lists
        ("<queue>\x06\x16<p>"). Listed by key, not by settings, so a message waiting for a
        removed version is seen as waiting, not dispatched again every tick."""
        keys: set[bytes] = set()
        for queue in OCR_QUEUES:
            keys.update(self.client.scan_iter(match=f"{queue}*", count=1000, _type="list"))
        return keys

    def _ids_in(self, key: bytes) -> set[str]:
        ids: set[str] = set()
        start = 0
        while chunk := self.client.lrange(key, start, start + _CHUNK - 1):
            ids.update(filter(None, (_task_id(raw) for raw in chunk)))
            start += _CHUNK
        return ids


def _task_id(raw: bytes | str) -> str | None:
    try:
        return str(json.loads(raw)["headers"]["id"])
    except (ValueError, KeyError, TypeError):
        return None  # not a Celery message: nothing of ours
