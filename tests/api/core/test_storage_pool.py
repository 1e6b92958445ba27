"""The S3 client shares its connections among a GPU worker's task threads (160 at 128 groups)
without opening and throwing away one per request, on the real S3 server of the test stack."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from uocr_core.storage import S3ObjectStore

THREADS = 48


def _pool_overflows(store: S3ObjectStore, caplog: pytest.LogCaptureFixture) -> int:
    store.put("pool/object", b"x" * 4096)
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"),
        ThreadPoolExecutor(THREADS) as pool,
    ):
        sizes = list(pool.map(lambda _: len(store.get("pool/object")), range(4 * THREADS)))
    assert sizes == [4096] * (4 * THREADS)
    return sum("Connection pool is full" in r.getMessage() for r in caplog.records)


def test_many_task_threads_reuse_the_store_connections(stack, caplog) -> None:  # type: ignore[no-untyped-def]
    store = S3ObjectStore(stack.settings.s3)
    assert stack.settings.s3.max_pool_connections >= 160
    assert _pool_overflows(store, caplog) == 0
    # The check can fail: botocore's own default of 10 connections overflows at once.
    narrow = S3ObjectStore(stack.settings.s3.model_copy(update={"max_pool_connections": 10}))
    assert _pool_overflows(narrow, caplog) > 0
