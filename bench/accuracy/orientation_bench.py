"""Pages fed upside down or sideways, read as they lie and turned upright, side by side.

    .venv/bin/python -m bench.accuracy.orientation_bench [--docs a,b] [--turns 0 90 180 270]

The CI's real documents (bench/accuracy/), each page "scanned" as the accuracy bench scans it
and fed turned: 0 (upright), 180 (upside down), 90 and 270 (sideways). Each scan goes through
``uocr run`` twice in the same command: with ``worker.auto_rotate_pages`` off (the baseline:
every page read as it lies) and on. Prints the CER of both against the pages' own text, the
ratio, and the seconds each took (the upright rows show what the check costs a page that needs
no turn).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import harness
from bench.accuracy.corpus import CI_DOCUMENTS, fetch
from bench.accuracy.runner import run_uocr, scan
from ocr_worker.accuracy.scoring import PageScore, document_cer, score_page
from uocr_core.logging import configure_logging
from uocr_core.settings import load_settings


def main() -> None:
    parser = harness.parser(__doc__, docs="")
    parser.add_argument("--turns", type=int, nargs="+", default=[0, 180, 90, 270])
    args = parser.parse_args()
    configure_logging("warning")
    chosen = set(filter(None, args.docs.split(",")))
    documents = tuple(d for d in CI_DOCUMENTS if not chosen or d.doc_id in chosen)
    fetch(documents)
    columns = ["fed turned", "pages", "CER as it lies", "CER turned upright", "ratio"]
    print("| " + " | ".join([*columns, "s as it lies", "s upright"]) + " |")
    print("|---" * (len(columns) + 2) + "|")
    rows: dict[str, dict[str, float]] = {}
    for turn in args.turns:
        scores: dict[bool, list[PageScore]] = {False: [], True: []}
        seconds = {False: 0.0, True: 0.0}
        for document in documents:
            scanned = scan(document, feed_turn=turn)
            for rotate in (False, True):
                settings = load_settings(worker={"auto_rotate_pages": rotate})
                with tempfile.TemporaryDirectory() as tmp:
                    with harness.Stopwatch() as watch:
                        texts = run_uocr(scanned.pdf, Path(tmp), settings)
                    seconds[rotate] += watch.seconds
                texts = (texts + [""] * len(scanned.references))[: len(scanned.references)]
                scores[rotate] += [
                    score_page(t, r) for t, r in zip(texts, scanned.references, strict=True)
                ]
        lying, upright = document_cer(scores[False]), document_cer(scores[True])
        ratio = f"{upright / lying:.2f}" if lying else "-"
        print(
            f"| {turn}° | {len(scores[True])} | {lying:.2%} | {upright:.2%} | {ratio} "
            f"| {seconds[False]:.0f} | {seconds[True]:.0f} |",
            flush=True,
        )
        rows[f"{turn}_degrees"] = {
            "pages": len(scores[True]),
            "cer_as_it_lies": lying,
            "cer_turned_upright": upright,
            "seconds_as_it_lies": seconds[False],
            "seconds_upright": seconds[True],
        }
    harness.write(rows, args, harness.card())


if __name__ == "__main__":
    main()
