"""Per-page output lengths shaped like the real model's, for benches whose random weights never
stop by themselves.

The page guard closes a page at its token budget and forces the next page's marker, so a
random-weight engine writes exactly ``budget`` tokens a page. Its budget is one number for every
page (``unlimited_ocr.max_tokens_per_page``); here each page gets its own, drawn from the shape
of the real model's output:

- ``real``: 12% short pages (a title, a figure, a near-empty sheet) at 50-250 tokens, uniform;
  the rest det blocks and tables at 700-1,500 tokens, most near 900 (a triangular law, mode
  900). The shape's own mean is ~927 tokens a page; ``tokens`` rescales every draw to that
  mean (700, the issue's goal table: short pages then 38-189, the rest 528-1,132), 0 keeps it.
- ``fixed``: every page ``tokens``, as before.

A page's draw depends only on the seed, its page number and its pixels (a sparse CRC), never on
the job id or the order groups run in: the bare engine and the whole service decode the same
lengths for the same documents, run after run.

The bare engine installs the budgets in its own process (``install``). The service's GPU worker
(its engine child too) gets them from ``sitecustomize.py`` (``SITECUSTOMIZE``, written by the
bench where the worker's PYTHONPATH starts, gated by ``BENCH_PAGE_LENGTHS``), which patches
``UnlimitedOcrEngine._request`` when that module is first imported. ``Drain`` ends a run fast:
once set (or once its file exists), every open page closes at once, so the groups in flight
finish in a few steps rather than running on for a minute at 128 sequences.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import math
import os
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

MIXES = ("fixed", "real")
SHORT_SHARE = 0.12
SHORT = (50.0, 250.0)  # uniform
BODY = (700.0, 900.0, 1500.0)  # triangular: low, mode, high
ENV = "BENCH_PAGE_LENGTHS"  # JSON of a PageLengths: the worker's processes install it
DRAIN_ENV = "BENCH_DRAIN_FILE"  # its existence drains the worker's groups in flight
ENGINE_MODULE = "ocr_worker.engines.unlimited_ocr.runtime.engine"


def shape_mean() -> float:
    """The ``real`` shape's own mean, tokens a page."""
    return SHORT_SHARE * (SHORT[0] + SHORT[1]) / 2 + (1 - SHORT_SHARE) * sum(BODY) / 3


@dataclass(frozen=True)
class PageLengths:
    mix: str = "fixed"
    tokens: int = 128  # fixed: every page; real: the mean (0: the shape's own, ~927)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mix not in MIXES:
            raise ValueError(f"page tokens mix {self.mix!r}: one of {MIXES}")
        if self.tokens < (0 if self.mix == "real" else 1):
            raise ValueError(f"page tokens {self.tokens}: too few")

    @property
    def scale(self) -> float:
        return self.tokens / shape_mean() if self.mix == "real" and self.tokens else 1.0

    def draw(self, page_no: int, pixels: Any = None) -> int:
        """This page's length in tokens (its marker not counted)."""
        if self.mix == "fixed":
            return self.tokens
        u, v = _uniforms(f"{self.seed}:{page_no}:{pixel_key(pixels)}")
        if u < SHORT_SHARE:
            raw = SHORT[0] + v * (SHORT[1] - SHORT[0])
        else:
            low, mode, high = BODY
            split = (mode - low) / (high - low)
            raw = (
                low + math.sqrt(v * (high - low) * (mode - low))
                if v < split
                else high - math.sqrt((1 - v) * (high - low) * (high - mode))
            )
        return max(1, round(raw * self.scale))

    def most(self) -> int:
        """The longest page any draw gives (the engine's max_tokens_per_page must allow it)."""
        return self.tokens if self.mix == "fixed" else math.ceil(BODY[2] * self.scale)

    def summary(self, lengths: Sequence[int] | None = None) -> dict[str, Any]:
        """The law and, for ``lengths`` (default: 20,000 draws), their mean and percentiles."""
        drawn = sorted(lengths if lengths is not None else [self.draw(n) for n in range(20000)])
        at = lambda q: drawn[min(len(drawn) - 1, int(q * len(drawn)))]  # noqa: E731
        short = SHORT[1] * self.scale
        return {
            **asdict(self),
            "shape": {"short_share": SHORT_SHARE, "short": SHORT, "body_triangular": BODY},
            "scale": round(self.scale, 4),
            "pages": len(drawn),
            "mean": round(sum(drawn) / len(drawn), 1) if drawn else None,
            "p10_p50_p90": [at(0.1), at(0.5), at(0.9)] if drawn else None,
            "short_share": round(sum(n <= short for n in drawn) / len(drawn), 3) if drawn else None,
            "max": drawn[-1] if drawn else None,
        }

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> PageLengths:
        return cls(**json.loads(text))


def pixel_key(pixels: Any) -> int:
    """A CRC of every 16th pixel of every 16th row: the same page drawn the same way, the same
    key (0 without pixels)."""
    if pixels is None:
        return 0
    import numpy as np

    return zlib.crc32(np.ascontiguousarray(pixels[::16, ::16]).tobytes())


def _uniforms(text: str) -> tuple[float, float]:
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    return (
        int.from_bytes(digest[:8], "little") / 2**64,
        int.from_bytes(digest[8:], "little") / 2**64,
    )


class Drain:
    """Set (in this process) or its file present (any process: read at most every 0.25 s):
    every page the guards write closes at once."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._on = False
        self._checked = 0.0

    def set(self) -> None:
        self._on = True

    def clear(self) -> None:
        self._on = False
        self._checked = 0.0

    def on(self) -> bool:
        if self._on or self.path is None:
            return self._on
        now = time.monotonic()
        if now - self._checked > 0.25:
            self._checked = now
            self._on = os.path.exists(self.path)
        return self._on


_GUARD_CLASSES: dict[type, type] = {}


def budget_pages(guard: Any, budgets: list[int], drain: Drain) -> None:
    """Make ``guard`` (a PageGuard) close page i of its group at ``budgets[i]`` tokens, and
    every page at once while ``drain`` is on."""
    base = type(guard)
    if base not in _GUARD_CLASSES:

        def forced_token(self):  # type: ignore[no-untyped-def]
            if self.page_index >= 0:
                index = min(self.page_index, len(self.page_budgets) - 1)
                self.page_budget = 0 if self.drain.on() else self.page_budgets[index]
            return base.forced_token(self)

        name = f"Budgeted{base.__name__}"
        _GUARD_CLASSES[base] = type(name, (base,), {"forced_token": forced_token})
    guard.page_budgets, guard.drain = budgets, drain
    guard.__class__ = _GUARD_CLASSES[base]


def install(engine_class: type, lengths: PageLengths, drain: Drain) -> None:
    """Every group the engine class builds from now on decodes each page (context pages too)
    at its own length."""
    original = engine_class.__dict__.get("_bench_original_request") or engine_class._request  # type: ignore[attr-defined]

    def _request(self, group):  # type: ignore[no-untyped-def]
        request = original(self, group)
        pages = [*group.context, *group.pages]
        budget_pages(request.guard, [lengths.draw(p.page_no, p.pixels) for p in pages], drain)
        return request

    engine_class._bench_original_request = original  # type: ignore[attr-defined]
    engine_class._request = _request  # type: ignore[attr-defined]


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` once the module ``name`` has been executed."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader, then = spec.loader, self.then
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            then(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def hook_from_env() -> None:
    """In a worker's process (from sitecustomize): install ``ENV``'s lengths into the engine
    class when its module is imported."""
    text = os.environ.get(ENV)
    if not text:
        return
    lengths, drain = PageLengths.from_env(text), Drain(os.environ.get(DRAIN_ENV))

    def then(module: ModuleType) -> None:
        install(module.UnlimitedOcrEngine, lengths, drain)
        print(f"bench page lengths installed in pid {os.getpid()}: {lengths}", file=sys.stderr)

    if ENGINE_MODULE in sys.modules:
        then(sys.modules[ENGINE_MODULE])
    else:
        sys.meta_path.insert(0, _AfterImport(ENGINE_MODULE, then))


# Written where the worker's PYTHONPATH starts ($GPU_STACK_DIR/site): Python imports the first
# sitecustomize on sys.path at start-up, in every process (the spawned engine child too); the
# one it hides, if any, still runs.
SITECUSTOMIZE = '''\
"""Written by bench/service/gpu_service_bench.py: per-page output lengths in the bench's GPU
worker (bench/service/page_lengths.py), only where BENCH_PAGE_LENGTHS is set."""
import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys

if _os.environ.get("BENCH_PAGE_LENGTHS"):
    try:
        from bench.service import page_lengths as _page_lengths

        _page_lengths.hook_from_env()
    except Exception as _error:  # never stop a process for the bench's sake
        print(f"bench sitecustomize: {_error!r}", file=_sys.stderr)
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(_util.module_from_spec(_spec))
'''
