"""A GPU worker's main process in miniature: resident memory with glibc's mmap threshold left
to rise (the default) against pinned (``ocr_worker.heap.return_freed_buffers``).

Each round of ``--threads`` task threads does what a task thread does with a page group: holds
8 rendered pages (~2.3 MB each, as drawn at 1024 a side), pickles them as a group goes to the
engine's process, reads them back, makes small objects as the store and database clients do,
and lets everything go. Resident memory is read once every thread has finished, when nothing
is held: what stays is what the allocator kept. Each side runs in a process of its own.

    .venv/bin/python -m bench.service.heap_bench --threads 24 --rounds 4 --groups 10
"""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
import threading
import time

import numpy as np
import psutil

from bench import harness

MB = 1 << 20


def one_group(seed: int) -> None:
    rng = random.Random(seed)
    pages = [np.full((1024, rng.randint(700, 800), 3), 7, np.uint8) for _ in range(8)]
    sent = pickle.dumps(pages, protocol=5)
    chatter = [bytes(rng.randint(100, 5000)) for _ in range(200)]  # ~0.5 MB of small objects
    time.sleep(0.005)  # other threads interleave, as they do around I/O
    received = pickle.loads(sent)
    del pages, sent, chatter, received


def run(threads: int, rounds: int, groups: int, pinned: bool) -> dict[str, object]:
    """Resident MB at the start and after each round, in this process."""
    if pinned:
        from ocr_worker.heap import return_freed_buffers

        assert return_freed_buffers(), "glibc's mallopt refused the threshold"
    process = psutil.Process()
    start = process.memory_info().rss / MB
    after = []

    def task_thread(seed: int) -> None:
        for g in range(groups):
            one_group(seed * 1000 + g)

    for r in range(rounds):
        workers = [
            threading.Thread(target=task_thread, args=(r * threads + t,)) for t in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        after.append(round(process.memory_info().rss / MB, 1))
    return {"start_mb": round(start, 1), "after_round_mb": after}


def side(threads: int, rounds: int, groups: int, pinned: bool) -> dict[str, object]:
    """``run`` in a fresh process: the allocator's state starts clean for each side."""
    code = (
        "import json, sys; from bench.service.heap_bench import run; "
        f"print(json.dumps(run({threads}, {rounds}, {groups}, {pinned})))"
    )
    root = harness.ROOT  # so that the child imports this bench
    with harness.Stopwatch() as watch:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    if out.returncode != 0:
        raise RuntimeError(f"the {'pinned' if pinned else 'default'} side failed:\n{out.stderr}")
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    result["seconds"] = round(watch.seconds, 2)
    return result


def main() -> None:
    parser = harness.parser(
        __doc__,
        threads=24,
        rounds=4,
        groups=10,
        help={"threads": "task threads a round", "groups": "groups per thread per round"},
    )
    args = parser.parse_args()
    default = side(args.threads, args.rounds, args.groups, pinned=False)
    pinned = side(args.threads, args.rounds, args.groups, pinned=True)
    print(f"threads={args.threads} rounds={args.rounds} groups per thread a round={args.groups}")
    print("side       start MB  MB after each round (nothing held)   seconds")
    for name, r in (("default", default), ("pinned", pinned)):
        print(f"{name:<10} {r['start_mb']:>8}  {r['after_round_mb']}   {r['seconds']}")
    kept = [r["after_round_mb"][-1] - r["start_mb"] for r in (default, pinned)]  # type: ignore[index, operator]
    print(f"kept after the last round, pinned / default: {kept[1] / kept[0]:.2f}")
    print(f"seconds, pinned / default: {pinned['seconds'] / default['seconds']:.2f}")  # type: ignore[operator]
    harness.write({"default": default, "pinned": pinned}, args, harness.card())


if __name__ == "__main__":
    main()
