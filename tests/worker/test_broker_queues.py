"""What the reconciler counts as waiting in Redis: every model version's ready lists, those of a
version no longer in the settings too, so such a job is never dispatched again every tick."""

from __future__ import annotations

import json

import redis

from ocr_worker.broker_queues import RedisWaitingTasks
from tests.conftest import ServiceUrls, fresh_redis_url


def _message(task_id: str) -> str:
    return json.dumps({"headers": {"id": task_id, "task": "ocr.page_group"}, "body": ""})


def test_every_versions_ready_lists_are_read_and_nothing_else(service_urls: ServiceUrls) -> None:
    url = fresh_redis_url(service_urls)
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.rpush("ocr.backlog", _message("plain"))
    client.rpush("ocr.long.v2", _message("v2-long"))
    client.rpush("ocr.interactive.retired\x06\x163", _message("removed-version-priority-3"))
    client.rpush("control", _message("webhook"))  # not a page group's queue
    client.hset("unacked", "tag", _message("taken"))  # taken by a worker: not waiting
    client.rpush("ocr.backlog.v2", "not a celery message")
    assert RedisWaitingTasks(url).task_ids() == {"plain", "v2-long", "removed-version-priority-3"}
    client.flushdb()
