"""Pages fed upside down or sideways, read as they lie and turned upright, side by side.

    .venv/bin/python -m bench.orientation_bench [--docs a,b] [--turns 0 90 180 270]

The CI's real documents (bench/accuracy/), each page "scanned" as the accuracy bench scans it
and fed turned: 0 (upright), 180 (upside down), 90 and 270 (sideways). Each scan goes through
``uocr run`` twice in the same command: with ``worker.auto_rotate_pages`` off (the baseline:
every page read as it lies) and on. Prints the CER of both against the pages' own text, the
ratio, and the seconds each took (the upright rows show what the check costs a page that needs
no turn).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.accuracy.corpus import CI_DOCUMENTS, fetch
from bench.accuracy.runner import run_uocr, scan
from ocr_worker.accuracy.scoring import PageScore, document_cer, score_page
from uocr_core.logging import configure_logging
from uocr_core.settings import load_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="", help="comma-separated document ids (default: all)")
    parser.add_argument("--turns", type=int, nargs="+", default=[0, 180, 90, 270])
    args = parser.parse_args()
    configure_logging("warning")
    chosen = set(filter(None, args.docs.split(",")))
    documents = tuple(d for d in CI_DOCUMENTS if not chosen or d.doc_id in chosen)
    fetch(documents)
    columns = ["fed turned", "pages", "CER as it lies", "CER turned upright", "ratio"]
    print("| " + " | ".join([*columns, "s as it lies", "s upright"]) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for turn in args.turns:
        scores: dict[bool, list[PageScore]] = {False: [], True: []}
        seconds = {False: 0.0, True: 0.0}
        for document in documents:
            scanned = scan(document, feed_turn=turn)
            for rotate in (False, True):
                settings = load_settings(worker={"auto_rotate_pages": rotate})
                with tempfile.TemporaryDirectory() as tmp:
                    started = time.perf_counter()
                    texts = run_uocr(scanned.pdf, Path(tmp), settings)
                    seconds[rotate] += time.perf_counter() - started
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


if __name__ == "__main__":
    main()
