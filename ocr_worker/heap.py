"""Freed page buffers go back to the system, in worker processes of many threads.

glibc serves an allocation above its mmap threshold with a mapping of its own, unmapped when
freed. But each such free raises the threshold to the freed size (up to 32 MB), so after the
first rendered page (~2.4 MB) or group pickle (~20 MB) is freed, the next ones come from the
heap of whichever arena the thread uses, and a GPU worker's dozens of task threads each keep
an arena's high-water mark: resident memory that climbs with the threads and is never given
back (`python -m bench.service.heap_bench`). Pinning the threshold keeps it where it is: big buffers
are mapped and unmapped, small ones stay in the arenas.

Only processes of many threads pin it: a GPU worker's (its task threads) and its engine's
(a thread per group). A prefork child or a render process runs one thing at a time in one
arena, whose peak is one task's; it keeps the faster reuse (the CPU worker's memory is flat
over 60 documents, bench/RESULTS.md).
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20  # a page buffer is larger; parsed JSON and small copies are not


def return_freed_buffers() -> bool:
    """Pin this process's mmap threshold. False where the C library is not glibc (it has no
    such parameter: musl maps big buffers and unmaps them anyway)."""
    try:
        loaded = ctypes.CDLL(None)  # the C library this process runs on, whichever it is
        return bool(loaded.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False
