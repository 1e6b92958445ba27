"""Accuracy on real scanned documents: uocr against bare RapidOCR on the same pixels, one run.

    .venv/bin/python -m bench.accuracy.accuracy_bench [--variant N] [--docs a,b] [--extras]

Fetches the documents (Debian packages, cached in .ci-state/accuracy), scans the chosen pages
(seeded; ``--variant`` gives other scans of the same pages), then prints per document and overall
the CER of bare RapidOCR and of uocr, their ratio, the pages and whether they came back in order.
See bench/accuracy/ for the document set, the scans and the scoring.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench import harness
from bench.accuracy.corpus import (
    CI_DOCUMENTS,
    CI_TABLES,
    EXTRA_DOCUMENTS,
    TABLE_DOCUMENTS,
    SourceDocument,
    fetch,
)
from bench.accuracy.runner import BareRapidOcr, DocumentResult, evaluate, scan
from uocr_core.logging import configure_logging
from uocr_core.settings import Settings


def overall(results: list[DocumentResult]) -> tuple[float, float]:
    """CER of bare RapidOCR and of uocr over every character of every document."""
    length = sum(s.length for r in results for s in r.bare)
    bare = sum(s.errors for r in results for s in r.bare) / max(length, 1)
    uocr = sum(s.errors for r in results for s in r.uocr) / max(length, 1)
    return bare, uocr


def ratio(uocr: float, bare: float) -> str:
    return f"{uocr / bare:.2f}x" if bare else ("1.00x" if uocr == 0 else "inf")


def table(results: list[DocumentResult]) -> str:
    header = (
        f"| {'document':<17} | pages | CER bare | CER uocr | uocr/bare | order OK "
        "| lines found, bare / uocr | lines in order, bare / uocr | table rows kept, bare / uocr |"
    )
    lines = [header, "|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|"]
    for r in results:
        pages = f"{r.pages_returned}/{r.pages_expected}"
        found = f"{r.lines('bare', 'found'):.3f} / {r.lines('uocr', 'found'):.3f}"
        ordered = f"{r.lines('bare', 'in_order'):.3f} / {r.lines('uocr', 'in_order'):.3f}"
        rows = f"{r.rows('bare'):.3f} / {r.rows('uocr'):.3f}"
        lines.append(
            f"| {r.doc_id:<17} | {pages:>5} | {r.cer_bare:>8.2%} | {r.cer_uocr:>8.2%} "
            f"| {ratio(r.cer_uocr, r.cer_bare):>9} | {'yes' if r.order_ok else 'NO':>8} "
            f"| {found:>24} | {ordered:>27} | {rows:>28} |"
        )
    bare, uocr = overall(results)
    total = sum(r.pages_expected for r in results)
    ok = all(r.order_ok for r in results)
    lines.append(
        f"| {'overall':<17} | {total:>5} | {bare:>8.2%} | {uocr:>8.2%} "
        f"| {ratio(uocr, bare):>9} | {'yes' if ok else 'NO':>8} | {'':>24} | {'':>27} | {'':>28} |"
    )
    return "\n".join(lines)


def run(documents: tuple[SourceDocument, ...], variant: int) -> list[DocumentResult]:
    fetch(documents)
    settings = Settings()
    bare = BareRapidOcr()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for doc in documents:
            with harness.Stopwatch() as watch:
                results.append(evaluate(scan(doc, variant), settings, Path(tmp), bare))
            print(f"{doc.doc_id}: {watch.seconds:.0f} s", file=sys.stderr, flush=True)
    return results


def _no_columns() -> None:
    """Every page read line by line across its width, as if no gutter were ever found."""
    from ocr_worker.engines.layout import order

    order._column_run = lambda lines, unit: None  # type: ignore[assignment]


def _no_tables() -> None:
    """No table found: a table's lines read as ordinary lines, and the column finder takes a
    table whose last column wraps for two page columns again."""
    from ocr_worker.engines.layout import order, paragraphs

    paragraphs.find_tables = lambda lines, unit: []  # type: ignore[assignment]
    order._table = lambda boxes, cuts: False  # type: ignore[assignment]


ABLATIONS = {"columns": _no_columns, "tables": _no_tables}


def main() -> None:
    parser = harness.parser(__doc__, docs="")
    parser.add_argument("--variant", type=int, default=0, help="another scan of the same pages")
    parser.add_argument("--extras", action="store_true", help="add the non-CI tuning pages")
    parser.add_argument("--tables", action="store_true", help="only the table pages, all of them")
    parser.add_argument(
        "--ablate",
        nargs="*",
        default=[],
        choices=sorted(ABLATIONS),
        help="switch the layout's column or table logic off (what the gates must catch)",
    )
    args = parser.parse_args()
    for name in args.ablate:
        ABLATIONS[name]()
    documents = CI_DOCUMENTS + CI_TABLES + (EXTRA_DOCUMENTS if args.extras else ())
    if args.tables:
        documents = TABLE_DOCUMENTS
    if args.docs:
        documents = tuple(d for d in documents if d.doc_id in args.docs.split(","))
    configure_logging("warning")
    with harness.Stopwatch() as watch:
        results = run(documents, args.variant)
    print(table(results))
    print(f"scan variant {args.variant}, {watch.seconds:.0f} s")
    bare, uocr = overall(results)
    figures = {
        "variant": args.variant,
        "cer_bare": bare,
        "cer_uocr": uocr,
        "seconds": watch.seconds,
        "documents": {
            r.doc_id: {
                "pages": r.pages_expected,
                "pages_returned": r.pages_returned,
                "cer_bare": r.cer_bare,
                "cer_uocr": r.cer_uocr,
                "order_ok": r.order_ok,
                "lines_found": (r.lines("bare", "found"), r.lines("uocr", "found")),
                "lines_in_order": (r.lines("bare", "in_order"), r.lines("uocr", "in_order")),
                "table_rows_kept": (r.rows("bare"), r.rows("uocr")),
            }
            for r in results
        },
    }
    harness.write(figures, args, harness.card())


if __name__ == "__main__":
    main()
