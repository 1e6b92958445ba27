"""What the searchable PDF costs, against the OCR it follows, in one run: seconds per page to
build it against seconds per page of bare RapidOCR on the same scans, and its size against the
uploaded PDF's. No services needed:

    .venv/bin/python -m bench.searchable_pdf_bench --pages 100
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ocr_worker.engines.base import PageImage
from ocr_worker.engines.rapidocr import RapidOcrEngine
from ocr_worker.imaging import PageRasterizer
from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
from tests.factories import sample_pages, scanned_pdf
from uocr_core.storage import LocalObjectStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--ocr-pages", type=int, default=4, help="pages OCRed for real results")
    args = parser.parse_args()
    pdf = scanned_pdf(sample_pages(args.pages))
    with tempfile.TemporaryDirectory() as folder:
        store = LocalObjectStore(Path(folder))
        store.put("doc.pdf", pdf)
        rasterizer = PageRasterizer(store, dpi=150, max_side=4000)
        engine = RapidOcrEngine(threads=2)
        engine.recognize_page(PageImage(0, rasterizer.render("doc.pdf", 0)))  # warm-up
        started = time.perf_counter()
        read = [
            engine.recognize_page(PageImage(n + 1, rasterizer.render("doc.pdf", n)))
            for n in range(args.ocr_pages)
        ]
        ocr = (time.perf_counter() - started) / args.ocr_pages
    # Every page gets a real page's result (cycled): the layer's size and work are realistic.
    results = [read[n % len(read)].model_copy(update={"page": n + 1}) for n in range(args.pages)]
    sources = [SourcePage("doc.pdf", n) for n in range(args.pages)]
    started = time.perf_counter()
    out = build_searchable_pdf(lambda key: pdf, sources, results)
    build = (time.perf_counter() - started) / args.pages
    print(f"pages={args.pages} (OCR timed on {args.ocr_pages}, 150 dpi, 2 threads)")
    print(f"bare RapidOCR            {ocr:8.3f} s/page")
    print(f"searchable PDF build     {build:8.3f} s/page   build / OCR: {build / ocr:.3f}")
    print(f"uploaded PDF {len(pdf) / 2**20:8.1f} MiB   searchable PDF {len(out) / 2**20:8.1f} MiB")
    print(f"size ratio (searchable / uploaded): {len(out) / len(pdf):.3f}")


if __name__ == "__main__":
    main()
