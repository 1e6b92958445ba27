"""What every bench shares: its common arguments, two timers, the card's name, and JSON results
that record the card, the commit, the date and the command line beside the figures.

    parser = harness.parser(__doc__, pages=12, documents=[16])   # + the bench's own arguments
    args = parser.parse_args()
    with harness.Stopwatch(device) as watch: ...                 # wall clock, card synced
    harness.graphed_us(call)                                      # CUDA graph, CUDA events
    harness.write(results, args, harness.card(device))

A result file is named ``<bench>_<card>_<date>[_<label>].json`` (card: h100, h200, cpu; date: the
day of the run, UTC), under bench/results/ unless ``--out`` names another file or folder.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# -- common arguments ------------------------------------------------------------------------


# Each common option once: its value's type, its help, and nargs when a bench's default is a
# list ("+", or "*" where an empty list means "none of these").
OPTIONS: dict[str, tuple[type, str, str]] = {
    "out": (
        Path,
        "where the JSON goes: a file, or a folder for <bench>_<card>_<date>[_<label>].json "
        "(default: bench/results/)",
        "+",
    ),
    "label": (str, "a word for the result file's name: <bench>_<card>_<date>_<label>.json", "+"),
    "tiny": (bool, "the tests' tiny model: a CPU smoke run", "+"),
    "pages": (int, "pages a document", "+"),
    "documents": (int, "documents", "+"),
    "concurrency": (int, "sequences (page groups) decoding at once", "+"),
    "workspace_gb": (float, "the KV workspace, GB", "+"),
    "no_cuda_graphs": (bool, "run the decode steps without CUDA graphs", "+"),
    "sr_swa_blocks": (int, "SR-SWA's blocks (0: R-SWA, the default rule)", "+"),
    "batches": (int, "sequences a decode step", "+"),
    "step_batches": (int, "sequences a timed decode step", "*"),
    "steps": (int, "steps timed", "+"),
    "groups": (int, "page groups", "+"),
    "rounds": (int, "rounds", "+"),
    "warmup": (int, "rounds before the first that counts", "+"),
    "threads": (int, "threads", "+"),
    "processes": (int, "render processes", "+"),
    "dpi": (int, "dots per inch a page is drawn at", "+"),
    "long_side": (int, "pixels a page's long side is drawn at", "+"),
    "docs": (str, "comma-separated document ids (default: all)", "+"),
}


def parser(
    doc: str | None, help: dict[str, str] | None = None, results: bool = True, **defaults: Any
) -> argparse.ArgumentParser:
    """A bench's parser: the description from its docstring's first line, ``--out`` and
    ``--label`` (unless ``results`` is False: a tool that writes no results), and the common
    options named in ``defaults`` with those defaults (a list: one or more values; True/False: a
    switch). ``help`` replaces an option's common help."""
    made = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    arguments(made, help=help, **({"out": None, "label": None} if results else {}) | defaults)
    return made


def arguments(
    parser: argparse.ArgumentParser, help: dict[str, str] | None = None, **defaults: Any
) -> None:
    """Add the common options named in ``defaults`` to ``parser`` (see ``parser``)."""
    for name, default in defaults.items():
        kind, text, many = OPTIONS[name]
        flag = "--" + name.replace("_", "-")
        text = (help or {}).get(name, text)
        if kind is bool:
            parser.add_argument(flag, action="store_true", help=text)
        elif isinstance(default, list):
            parser.add_argument(flag, type=kind, nargs=many, default=default, help=text)
        else:
            parser.add_argument(flag, type=kind, default=default, help=text)


# -- timers ----------------------------------------------------------------------------------


def sync(device: torch.device | None) -> None:
    """Wait for the card's queued work (nothing to wait for on the CPU)."""
    if device is not None and device.type == "cuda":
        import torch

        torch.cuda.synchronize()


class Stopwatch:
    """Wall-clock time from a synced card to a synced card (the CPU needs no sync):

    with Stopwatch(device) as watch:
        work()
    watch.seconds, watch.ms
    """

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = device
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        sync(self.device)
        self.started = time.perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        sync(self.device)
        self.seconds = time.perf_counter() - self.started

    @property
    def ms(self) -> float:
        return self.seconds * 1000

    @classmethod
    def ms_of(
        cls,
        work: Callable[[], object],
        device: torch.device | None = None,
        repeats: int = 3,
        warmup: int = 1,
        statistic: Callable[[list[float]], float] = statistics.median,
    ) -> float:
        """``statistic`` (the median) of ``work``'s wall ms over ``repeats`` calls, each timed
        on its own after ``warmup`` calls not timed."""
        for _ in range(warmup):
            sync(device)
            work()
        times = []
        for _ in range(repeats):
            with cls(device) as watch:
                work()
            times.append(watch.ms)
        return statistic(times)


def graphed_us(
    call: Callable[[], object] | None = None,
    repeats: int = 20,
    rounds: int = 5,
    graph: Any = None,
    unfit: tuple[type[BaseException], ...] = (),
) -> Any:
    """µs per call of ``call``, ``repeats`` calls captured in one CUDA graph (after three on a
    side stream) and the graph replayed ``rounds`` times back to back between two CUDA events,
    after one replay not timed. With ``graph``, a graph already captured: µs per replay. None
    where capturing raises one of ``unfit`` (tiles that do not fit the card, say)."""
    import torch

    if graph is None:
        assert call is not None, "graphed_us: a call or a graph"
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    call()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(repeats):
                    call()
        except unfit:
            return None
    else:
        repeats = 1
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rounds):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1000 / rounds / repeats


# -- the card --------------------------------------------------------------------------------


def card(device: torch.device | None = None) -> str:
    """The card's name as the engine's tuning tables know it (tuning.card_name, "cpu" off the
    GPU); with no device at hand, the first card nvidia-smi lists, or "cpu"."""
    if device is not None:
        from ocr_worker.engines.unlimited_ocr.kernels.tuning import card_name

        return card_name(device)
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if listed:
            return listed.splitlines()[0].strip()
    return "cpu"


def card_tag(name: str) -> str:
    """The card in a file name: "NVIDIA H100 80GB HBM3" -> "h100", "cpu" -> "cpu"."""
    model = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name)
    if model:
        return model.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-card"


# -- results ---------------------------------------------------------------------------------


def today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def commit() -> str:
    """The checkout's commit ("-dirty": with changes not committed), or "unknown"."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def bench_name() -> str:
    """The running bench's module name (``python -m bench.engine.engine_bench``: engine_bench)."""
    return Path(sys.argv[0]).stem


def result_path(
    out: Path | None, card_name: str, label: str | None = None, bench: str = "", ext: str = "json"
) -> Path:
    """``out`` where it names a file (it has a suffix), else the folder ``out`` (bench/results/
    by default) and in it ``<bench>_<card>_<date>[_<label>].<ext>``."""
    if out is not None and out.suffix:
        return out
    parts = [bench or bench_name(), card_tag(card_name), today(), *([label] if label else [])]
    return (out or RESULTS) / f"{'_'.join(parts)}.{ext}"


def command() -> str:
    """The command line that ran this bench, as one would type it again: ``python -m
    bench.engine.engine_bench --tiny`` (sys.argv[0] is the module's file under ``-m``)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None and spec.name and not spec.name.endswith("__main__"):
        return shlex.join([Path(sys.executable).name, "-m", spec.name, *sys.argv[1:]])
    return shlex.join([Path(sys.executable).name, *sys.argv])


def stamp(results: dict[str, Any], card_name: str) -> dict[str, Any]:
    """``results`` with the card, the commit, the date, the command line and sys.argv first (in
    place of any ``results`` had: a file read back and written again)."""
    meta: dict[str, Any] = {"card": card_name, "commit": commit(), "date": today()}
    meta["command"] = command()
    meta["argv"] = sys.argv
    return meta | {key: value for key, value in results.items() if key not in meta}


def write(
    results: dict[str, Any],
    args: argparse.Namespace,
    card_name: str,
    label: str | None = None,
    quiet: bool = False,
) -> Path:
    """Write ``results``, stamped, as JSON where ``args.out`` and ``args.label`` say (see
    ``result_path``; ``label`` is added to ``args.label``); returns the path."""
    labels = "-".join(filter(None, [getattr(args, "label", None), label]))
    path = result_path(getattr(args, "out", None), card_name, labels or None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamp(results, card_name), indent=1, default=str))
    if not quiet:
        print(f"results: {path}", file=sys.stderr, flush=True)
    return path
