"""The gate's rules (ocr_worker/accuracy/gate.py) on small runs: what passes, what fails and the
one line that says why. The same rules on real measured runs: tests/cli/test_eval.py."""

from __future__ import annotations

from ocr_worker.accuracy.evaluation import DocumentRun, VersionRun
from ocr_worker.accuracy.gate import compare
from ocr_worker.accuracy.scoring import PageScore


def _doc(
    doc_id: str, errors: list[int], *, returned: int | None = None, ordered: bool = True
) -> DocumentRun:
    scores = [PageScore(e, 1000) for e in errors]
    pages = len(errors) if returned is None else returned
    return DocumentRun(doc_id, len(errors), pages, ordered, scores, seconds=2.0)


def _run(version: str, *docs: DocumentRun) -> VersionRun:
    return VersionRun(version, ("rapidocr",), list(docs))


STABLE = _run("stable", _doc("letter", [10, 20]), _doc("table", [50]))


def test_the_same_reading_passes() -> None:
    verdict = compare(STABLE, _run("candidate", *STABLE.documents), margin_points=0.5)
    assert verdict.passed and verdict.reasons == [] and verdict.summary == "passed"


def test_worse_within_the_margin_passes_and_beyond_it_fails_naming_the_document() -> None:
    within = _run("candidate", _doc("letter", [10, 20]), _doc("table", [54]))
    assert compare(STABLE, within, margin_points=0.5).passed  # +0.4 points
    beyond = _run("candidate", _doc("letter", [10, 20]), _doc("table", [56]))
    verdict = compare(STABLE, beyond, margin_points=0.5)
    assert not verdict.passed
    assert verdict.reasons == [  # overall only +0.20 points: within the margin
        "candidate reads worse than stable on table: CER 5.60% vs 5.00% (+0.60 points, margin 0.50)"
    ]


def test_the_one_line_names_the_first_reason_and_counts_the_rest() -> None:
    much_worse = _run("candidate", _doc("letter", [10, 20]), _doc("table", [80]))
    verdict = compare(STABLE, much_worse, margin_points=0.5)
    assert verdict.reasons[1].startswith("candidate reads worse than stable overall: CER 3.67%")
    assert verdict.summary == verdict.reasons[0] + " (and 1 more)"


def test_better_reading_passes() -> None:
    better = _run("candidate", _doc("letter", [0, 0]), _doc("table", [0]))
    assert compare(STABLE, better, margin_points=0.0).passed


def test_a_missing_page_fails_whatever_the_cer() -> None:
    lost = _run("candidate", _doc("letter", [0, 0], returned=1), _doc("table", [0]))
    verdict = compare(STABLE, lost, margin_points=100)
    assert verdict.reasons == ["candidate returned 1 of 2 pages of letter"]


def test_pages_out_of_order_fail_whatever_the_cer() -> None:
    swapped = _run("candidate", _doc("letter", [10, 20], ordered=False), _doc("table", [50]))
    verdict = compare(STABLE, swapped, margin_points=100)
    assert verdict.summary == "candidate put the pages of letter out of order"


def test_overall_weighs_pages_so_one_bad_document_can_fail_alone() -> None:
    a = _run("a", _doc("short", [0]), _doc("long", [0] * 9))
    b = _run("b", _doc("short", [0]), _doc("long", [9] * 9))  # long: +0.90, overall: +0.81
    verdict = compare(a, b, margin_points=0.85)
    assert len(verdict.reasons) == 1
    assert verdict.reasons[0].startswith("b reads worse than a on long: CER 0.90% vs 0.00%")
