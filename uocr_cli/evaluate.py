"""``uocr eval``: the accuracy gate between two model versions, on a labelled set."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from uocr_cli.errors import CliError

if TYPE_CHECKING:
    from ocr_worker.accuracy.evaluation import DocumentRun, VersionRun
    from ocr_worker.accuracy.gate import GateVerdict


class EvalInputError(CliError):
    """The set or a version cannot be used as given (exit 2, like a usage error)."""

    exit_code = 2


@click.command("eval")
@click.argument("dataset", type=click.Path(path_type=Path))
@click.option(
    "--versions",
    nargs=2,
    required=True,
    metavar="A B",
    help="The version in service (A) and the candidate (B), as named in models.versions "
    "('default' when none are listed).",
)
@click.option(
    "--margin-cer",
    default=0.5,
    show_default=True,
    type=click.FloatRange(min=0),
    help="How many CER points B may read worse than A, overall or on any document.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead.")
def eval_command(
    dataset: Path, versions: tuple[str, str], margin_cer: float, as_json: bool
) -> None:
    """Run the labelled set DATASET through versions A and B, side by side: CER per document and
    overall, pages (expected vs returned) and their order, pages/s. Exit 1 when B reads worse
    than A by more than --margin-cer points (overall or on any document) or loses a page or its
    order; 2 for a set or version that cannot be used.

    DATASET is a directory with dataset.toml (or dataset.json, the same shape):

    \b
        name = "regression"
        [[documents]]
        id = "r-data-xref"
        file = "r-data-xref.pdf"           # PDF or image, relative to DATASET
        pages = 3                          # the page count expected back
        ground_truth = "r-data-xref.jsonl" # {"page": n, "text": "..."} per line, n = 1..pages
        # or: ground_truth = ["p1.txt", "p2.txt", "p3.txt"]
        covers = "cross-page references"   # optional

    Each document goes through the worker's own pipeline (rendering at worker.render_dpi, the
    version's engine, assembly) on this machine, with no servers.
    """
    from ocr_worker.accuracy.gate import compare
    from uocr_core.logging import configure_logging
    from uocr_core.settings import get_settings

    configure_logging("warning")
    labelled = _load(dataset)
    settings = get_settings()
    _require_known(settings, versions)  # before minutes of OCR on A
    run_a, run_b = (_evaluate(labelled, settings, name) for name in versions)
    verdict = compare(run_a, run_b, margin_points=margin_cer)
    if as_json:
        click.echo(json.dumps(_as_json(run_a, run_b, verdict, margin_cer), indent=2))
    else:
        print_table(labelled.name, run_a, run_b, margin_cer)
    finish(verdict, run_a, run_b)


def finish(verdict: GateVerdict, a: VersionRun, b: VersionRun) -> None:
    """The verdict in one line on stderr; exit 1 when B fails."""
    if not verdict.passed:
        click.echo(f"gate failed: {verdict.summary}", err=True)
        sys.exit(1)
    click.echo(f"gate passed: {b.version} reads no worse than {a.version}", err=True)


def _require_known(settings: Any, versions: tuple[str, str]) -> None:
    from uocr_core.model_versions import version

    for name in versions:
        try:
            version(settings, name)
        except KeyError as error:  # model_versions' message lists the versions there are
            raise EvalInputError(str(error.args[0])) from None


def _load(dataset: Path) -> Any:
    from ocr_worker.accuracy.dataset import DatasetError, load_dataset

    try:
        return load_dataset(dataset)
    except DatasetError as error:
        raise EvalInputError(str(error)) from None


def _evaluate(dataset: Any, settings: Any, version: str) -> VersionRun:
    from ocr_worker.accuracy.dataset import DatasetError
    from ocr_worker.accuracy.evaluation import evaluate_version

    try:
        return evaluate_version(dataset, settings, version, on_document=_report_document)
    except DatasetError as error:
        raise EvalInputError(str(error)) from None


def _report_document(version: str, run: DocumentRun) -> None:
    click.echo(
        f"{version}: {run.doc_id}: {run.pages_returned}/{run.pages_expected} pages "
        f"in {run.seconds:.1f} s, CER {run.cer:.2%}",
        err=True,
    )


def print_table(name: str, a: VersionRun, b: VersionRun, margin: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{name}: {a.version} (A) vs {b.version} (B), margin {margin} CER points")
    for column in ("document", "pages", f"A {a.version}", f"B {b.version}", "B - A"):
        table.add_column(column, justify="left" if column == "document" else "right")
    for doc_a, doc_b in zip(a.documents, b.documents, strict=True):
        table.add_row(
            doc_a.doc_id,
            f"{doc_a.pages_expected}",
            _cell(doc_a),
            _cell(doc_b),
            _points(doc_b.cer - doc_a.cer),
        )
    table.add_section()
    pages = sum(doc.pages_expected for doc in a.documents)
    table.add_row("overall CER", f"{pages}", f"{a.cer:.2%}", f"{b.cer:.2%}", _points(b.cer - a.cer))
    speed_a, speed_b = a.pages_per_second, b.pages_per_second
    table.add_row("pages/s", "", f"{speed_a:.2f}", f"{speed_b:.2f}", f"{_ratio(speed_b, speed_a)}")
    table.add_row("engine", "", ", ".join(a.engines), ", ".join(b.engines), "")
    Console(width=max(100, Console().width)).print(table)


def _cell(doc: DocumentRun) -> str:
    """CER, pages returned, and whether they came back in order: '1.23%  3/3 in order'."""
    order = "in order" if doc.order_ok else "OUT OF ORDER"
    return f"{doc.cer:.2%}  {doc.pages_returned}/{doc.pages_expected} {order}"


def _points(difference: float) -> str:
    return f"{difference * 100:+.2f} pts"


def _ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}x" if old else "-"


def _as_json(a: VersionRun, b: VersionRun, verdict: GateVerdict, margin: float) -> dict[str, Any]:
    return {
        "margin_cer_points": margin,
        "passed": verdict.passed,
        "reasons": verdict.reasons,
        "versions": {"A": _run_json(a), "B": _run_json(b)},
    }


def _run_json(run: VersionRun) -> dict[str, Any]:
    return {
        "version": run.version,
        "engines": list(run.engines),
        "cer": run.cer,
        "pages_per_second": run.pages_per_second,
        "documents": [
            {
                "id": doc.doc_id,
                "cer": doc.cer,
                "pages_expected": doc.pages_expected,
                "pages_returned": doc.pages_returned,
                "order_ok": doc.order_ok,
                "page_cer": [score.cer for score in doc.scores],
                "seconds": doc.seconds,
            }
            for doc in run.documents
        ],
    }
