"""A job id followed from ``tasks.page_group`` through the calls: a page group's life reads as
a chain of stages (docs/architecture.md, "Packages"): the path returns to a module it already
left at most twice.

The path is every call into our packages whose frame carries the job: a local ``job_id`` equal
to it, or a ``job`` row whose id is it. Calls are taken at entry, so "a local" is an argument.
Two counts of returns to a module already left, both printed and both asserted:

- over the page group's own modules (the task, the driver and its stages), the chain itself:
  5 when the stages lived in one class (its methods re-entered ``pipeline.py`` six times,
  after each call out), 0 since each stage owns its queries and calls its helpers before it
  calls out; at most 2 here;
- over every module of ours, shared floors included (the job lifecycle, object keys, the
  engine's base): 15 when the stages lived in one class, 14 when they shared one module of row
  queries and one of outputs, 4 since (the lifecycle entered to start the job and again to end
  it, object keys named by the document and by the progress, the engine told to forget the
  document); a ratchet at 4 here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import FrameType, SimpleNamespace
from typing import Any

import pytest

from tests.worker.conftest import ScriptedEngine

OUR_PACKAGES = ("ocr_worker", "uocr_core")
STAGES = ("claim", "lease", "render", "decode", "record", "advance", "settle")
# The page group's life: the task, the driver, its stages (not the floors they share).
CHAIN = ("ocr_worker.tasks", "ocr_worker.pipeline", *(f"ocr_worker.stages.{s}" for s in STAGES))
MAX_RETURNS = 2
MAX_RETURNS_ANYWHERE = 4  # a ratchet: what the path measures now


@dataclass(frozen=True)
class Stop:
    module: str
    function: str


def _row_id(value: Any) -> object:
    """A row's id without loading anything: the profiler must not issue queries of its own."""
    state = getattr(value, "_sa_instance_state", None)
    if state is not None:
        return state.identity[0] if state.identity else None
    return getattr(value, "__dict__", {}).get("id")


def _carries(frame: FrameType, job_id: str) -> bool:
    local = frame.f_locals
    return local.get("job_id") == job_id or ("job" in local and _row_id(local["job"]) == job_id)


def follow(job_id: str, call: Any) -> list[Stop]:
    """Every stop ``call()`` makes in our packages with the job in hand, in call order."""
    stops: list[Stop] = []

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] in OUR_PACKAGES and _carries(frame, job_id):
            stops.append(Stop(module, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return stops


def modules_entered(stops: list[Stop]) -> list[str]:
    """The modules in the order the path enters them (consecutive stops in one module: one)."""
    return [s.module for i, s in enumerate(stops) if i == 0 or stops[i - 1].module != s.module]


def chain_returns(entered: list[str]) -> int:
    """Returns to the page group's own modules: a floor visited in between counts as leaving."""
    return sum(module in CHAIN and module in entered[:i] for i, module in enumerate(entered))


def returns(entered: list[str]) -> int:
    """How often the path comes back to a module it had already left."""
    return sum(module in entered[:i] for i, module in enumerate(entered))


def describe(stops: list[Stop]) -> str:
    entered = modules_entered(stops)
    lines = [
        f"{len(stops)} stops in {len(set(entered))} modules, {returns(entered)} returns "
        f"({chain_returns(entered)} to the task, the driver or a stage)",
        *(f"  {s.module}.{s.function}" for s in stops),
        "modules: " + " -> ".join(m.rsplit(".", 1)[-1] for m in entered),
    ]
    return "\n".join(lines)


def test_the_counting_sees_a_return_only_after_leaving() -> None:
    assert returns(["a", "b", "c"]) == 0
    assert returns(["a", "b", "a", "c", "b"]) == 2
    driver, keys = "ocr_worker.pipeline", "uocr_core.object_keys"
    assert chain_returns([driver, keys, driver, keys]) == 1  # the floor's return is not counted


def test_a_job_id_goes_through_the_stages_in_order_coming_back_at_most_twice(
    harness, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from ocr_worker import tasks

    job_id = harness.submit(3)  # one group: claimed, decoded, recorded, and the job settled
    pipeline = harness.pipeline(ScriptedEngine())
    monkeypatch.setattr(tasks._Process, "runtime", SimpleNamespace(pipeline=pipeline))
    message = harness.dispatcher.groups.popleft()
    outcome: list[str] = []
    stops = follow(job_id, lambda: outcome.append(tasks.page_group(*message)))
    print(describe(stops))
    assert outcome == ["ran"]
    assert harness.job(job_id).status == "succeeded"
    assert stops[0] == Stop("ocr_worker.tasks", "page_group")
    entered = modules_entered(stops)
    lifecycle = ("claim", "decode", "record", "advance", "settle")  # render and lease: no job id
    in_order = [
        "ocr_worker.tasks",
        "ocr_worker.pipeline",
        *(f"ocr_worker.stages.{s}" for s in lifecycle),
    ]
    assert list(dict.fromkeys(m for m in entered if m in CHAIN)) == in_order, describe(stops)
    assert chain_returns(entered) <= MAX_RETURNS, describe(stops)
    assert returns(entered) <= MAX_RETURNS_ANYWHERE, describe(stops)
