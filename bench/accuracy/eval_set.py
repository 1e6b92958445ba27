"""The regression set of ``uocr eval``, built from real public documents.

    .venv/bin/python -m bench.accuracy.eval_set OUTDIR [--ci]
    .venv/bin/python -m bench.accuracy.eval_set --fetch     # only the sources (.ci/setup)

Pages of manuals shipped in Debian packages (fetched like the accuracy suite's, into
.ci-state/accuracy), "scanned" by ``scan.py`` (seeded: the same pages always make the same set)
into image-only PDFs, each with its pages' own text layers as ground truth (JSONL), and a
``dataset.toml`` listing them (the format: ``ocr_worker/accuracy/dataset.py``). Nothing of it is
committed: this file is the set's definition. ``--ci`` builds the subset CI gates on (5 pages);
without it, the whole set (41 pages, a 32-page document among them).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bench import harness
from bench.accuracy.corpus import R_MANUALS, SourceDocument, check_not_held_out, fetch
from bench.accuracy.runner import scan

OCTAVE = "usr/share/doc/octave/octave.pdf"

EVAL_DOCUMENTS = (
    SourceDocument(
        "r-admin-chapter",
        "r-doc-pdf",
        f"{R_MANUALS}/R-admin.pdf",
        (9, 10, 11, 12),
        "multi-page: prose, shell commands, sections running across pages",
    ),
    SourceDocument(
        "octave-profiler-table",
        "octave-doc",
        OCTAVE,
        (283, 284),
        "tables: the profiler's output (numbers in columns), code between them",
    ),
    SourceDocument(
        "r-data-xref",
        "r-doc-pdf",
        f"{R_MANUALS}/R-data.pdf",
        (6, 7, 11),
        "cross-page references ('see Chapter 2 [...], page 8') and the page they point to",
    ),
    SourceDocument(
        "r-faq-long",
        "r-doc-pdf",
        f"{R_MANUALS}/R-FAQ.pdf",
        tuple(range(4, 36)),
        "a long document: 32 consecutive pages, lists, references",
    ),
)
# The CI subset: one page or a few of each kind, the long document left to the full run.
# r-data-xref keeps the page citing "Chapter 2 [Spreadsheet-like data], page 8" and that page.
CI_PAGES = {"r-admin-chapter": (9, 10), "octave-profiler-table": (284,), "r-data-xref": (6, 11)}

check_not_held_out(EVAL_DOCUMENTS)


def documents(*, ci: bool) -> tuple[SourceDocument, ...]:
    if not ci:
        return EVAL_DOCUMENTS
    chosen = (d for d in EVAL_DOCUMENTS if d.doc_id in CI_PAGES)
    return tuple(replace(d, pages=CI_PAGES[d.doc_id]) for d in chosen)


def build(out_dir: Path, *, ci: bool) -> Path:
    """Writes the set into ``out_dir``; returns its dataset.toml."""
    chosen = documents(ci=ci)
    fetch(chosen)
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for source in chosen:
        scanned = scan(source)
        (out_dir / f"{source.doc_id}.pdf").write_bytes(scanned.pdf)
        truth = [{"page": n, "text": text} for n, text in enumerate(scanned.text_layers, 1)]
        lines = [json.dumps(record, ensure_ascii=False) for record in truth]
        (out_dir / f"{source.doc_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        entries.append(_entry(source))
    name = "uocr regression set" + (" (CI subset)" if ci else "")
    definition = out_dir / "dataset.toml"
    definition.write_text(f"name = {json.dumps(name)}\n" + "".join(entries), encoding="utf-8")
    return definition


def _entry(source: SourceDocument) -> str:
    # JSON strings are valid TOML basic strings for this text (no control characters).
    origin = f"{Path(source.member).name}, 0-based pages {list(source.pages)}"
    return (
        f"\n# {source.package}: {origin}\n[[documents]]\n"
        f"id = {json.dumps(source.doc_id)}\nfile = {json.dumps(source.doc_id + '.pdf')}\n"
        f"pages = {len(source.pages)}\nground_truth = {json.dumps(source.doc_id + '.jsonl')}\n"
        f"covers = {json.dumps(source.covers, ensure_ascii=False)}\n"
    )


def main() -> None:
    parser = harness.parser(__doc__, results=False)
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--ci", action="store_true", help="the CI subset (5 pages)")
    parser.add_argument("--fetch", action="store_true", help="fetch the sources, build nothing")
    args = parser.parse_args()
    if args.fetch:
        fetch(documents(ci=False))
    elif args.out_dir is None:
        parser.error("OUTDIR is required (or --fetch)")
    else:
        print(build(args.out_dir, ci=args.ci))


if __name__ == "__main__":
    main()
