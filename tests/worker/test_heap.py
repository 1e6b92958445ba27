"""A worker process of many threads gives freed page buffers back to the system.

Each side runs bench.service.heap_bench's miniature of a GPU worker's task threads in a fresh
process: threads hold 8 rendered pages and their pickle (~40 MB each at once), then let them go."""

from __future__ import annotations

import platform

import pytest

from bench.service.heap_bench import side


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold is glibc's")
def test_pages_freed_by_many_threads_leave_the_process() -> None:
    pinned = side(threads=8, rounds=3, groups=3, pinned=True)
    default = side(threads=8, rounds=3, groups=3, pinned=False)
    kept = {
        name: r["after_round_mb"][-1] - r["start_mb"]  # type: ignore[index, operator]
        for name, r in (("pinned", pinned), ("default", default))
    }
    # 8 threads held ~320 MB at once; pinned, under a sixth of that stays resident...
    assert kept["pinned"] < 50, (pinned, default)
    # ...where glibc left to itself keeps several times as much (measured ~300 MB).
    assert kept["pinned"] * 3 < kept["default"], (pinned, default)
