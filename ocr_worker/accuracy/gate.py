"""The accuracy gate: may version B replace version A?

B fails when its CER is worse than A's by more than the margin (in CER points), overall or on
any one document, and always when it loses a page or puts pages out of order: a reader notices a
missing page whatever the CER says. Throughput is reported, not gated: on a shared machine it
moves by more than a real regression would.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocr_worker.accuracy.evaluation import DocumentRun, VersionRun

DEFAULT_MARGIN_POINTS = 0.5


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    reasons: list[str]  # why B fails, worst kind first (pages, then documents, then overall)

    @property
    def summary(self) -> str:
        """One line: the first reason, and how many more there are."""
        if self.passed:
            return "passed"
        more = len(self.reasons) - 1
        return self.reasons[0] + (f" (and {more} more)" if more else "")


def compare(a: VersionRun, b: VersionRun, *, margin_points: float) -> GateVerdict:
    """Both runs must be over the same documents, in the same order."""
    if [d.doc_id for d in a.documents] != [d.doc_id for d in b.documents]:
        raise ValueError("the two runs are over different documents")
    margin = margin_points / 100
    reasons = [r for doc in b.documents if (r := _page_problem(b.version, doc))]
    for doc_a, doc_b in zip(a.documents, b.documents, strict=True):
        if doc_b.cer - doc_a.cer > margin:
            reasons.append(_worse(b.version, doc_b.doc_id, doc_b.cer, a.version, doc_a.cer, margin))
    if b.cer - a.cer > margin:
        reasons.append(_worse(b.version, "overall", b.cer, a.version, a.cer, margin))
    return GateVerdict(not reasons, reasons)


def _page_problem(version: str, doc: DocumentRun) -> str | None:
    if doc.pages_returned != doc.pages_expected:
        got = f"{doc.pages_returned} of {doc.pages_expected} pages"
        return f"{version} returned {got} of {doc.doc_id}"
    if not doc.order_ok:
        return f"{version} put the pages of {doc.doc_id} out of order"
    return None


def _worse(version: str, what: str, cer_b: float, base: str, cer_a: float, margin: float) -> str:
    where = "overall" if what == "overall" else f"on {what}"
    points = (cer_b - cer_a) * 100
    return (
        f"{version} reads worse than {base} {where}: CER {cer_b:.2%} vs {cer_a:.2%} "
        f"(+{points:.2f} points, margin {margin * 100:.2f})"
    )
