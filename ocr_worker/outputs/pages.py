"""A group's page results written to their objects, several store calls at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from uocr_core import object_keys
from uocr_core.contracts import PageResult
from uocr_core.storage import ObjectStore

# A group's page objects are written, and a document's read back, this many at a time: one
# after another, each round trip to the store sat between a group's decode and its document's
# next group (python -m bench.service.store_bench).
STORE_CALLS_AT_ONCE = 8


def write_page(store: ObjectStore, job_id: str, result: PageResult) -> str:
    key = object_keys.page_result_key(job_id, result.page)
    store.put(key, result.model_dump_json().encode(), "application/json")
    return key


def write_pages(store: ObjectStore, job_id: str, results: list[PageResult]) -> dict[int, str]:
    """Each page's object key, every page written (the first failure is raised)."""
    with store_calls(len(results)) as pool:
        keys = list(pool.map(lambda result: write_page(store, job_id, result), results))
    return {result.page: key for result, key in zip(results, keys, strict=True)}


def store_calls(count: int) -> ThreadPoolExecutor:
    """Threads for one batch of store calls (made per batch: a pool made at import would not
    survive a prefork worker's fork)."""
    return ThreadPoolExecutor(max(1, min(STORE_CALLS_AT_ONCE, count)), "store-calls")
