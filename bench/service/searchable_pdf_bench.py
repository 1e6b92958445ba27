"""What the searchable PDF costs, against the OCR it follows, in one run: seconds per page to
build it against seconds per page of bare RapidOCR on the same scans, and its size against the
uploaded PDF's. No services needed:

    .venv/bin/python -m bench.service.searchable_pdf_bench --pages 100
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import harness
from ocr_worker.engines.base import PageImage
from ocr_worker.engines.rapidocr import RapidOcrEngine
from ocr_worker.imaging import PageRasterizer
from ocr_worker.outputs.searchable_pdf import SourcePage, build_searchable_pdf
from tests.factories import sample_pages, scanned_pdf
from uocr_core.storage import LocalObjectStore


def main() -> None:
    parser = harness.parser(__doc__, pages=100, help={"pages": "pages of the document"})
    parser.add_argument("--ocr-pages", type=int, default=4, help="pages OCRed for real results")
    args = parser.parse_args()
    pdf = scanned_pdf(sample_pages(args.pages))
    with tempfile.TemporaryDirectory() as folder:
        store = LocalObjectStore(Path(folder))
        store.put("doc.pdf", pdf)
        rasterizer = PageRasterizer(store, dpi=150, max_side=4000)
        engine = RapidOcrEngine(threads=2)
        engine.recognize_page(PageImage(0, rasterizer.render("doc.pdf", 0)))  # warm-up
        with harness.Stopwatch() as watch:
            read = [
                engine.recognize_page(PageImage(n + 1, rasterizer.render("doc.pdf", n)))
                for n in range(args.ocr_pages)
            ]
        ocr = watch.seconds / args.ocr_pages
    # Every page gets a real page's result (cycled): the layer's size and work are realistic.
    results = [read[n % len(read)].model_copy(update={"page": n + 1}) for n in range(args.pages)]
    sources = [SourcePage("doc.pdf", n) for n in range(args.pages)]
    with harness.Stopwatch() as watch:
        out = build_searchable_pdf(lambda key: pdf, sources, results)
    build = watch.seconds / args.pages
    print(f"pages={args.pages} (OCR timed on {args.ocr_pages}, 150 dpi, 2 threads)")
    print(f"bare RapidOCR            {ocr:8.3f} s/page")
    print(f"searchable PDF build     {build:8.3f} s/page   build / OCR: {build / ocr:.3f}")
    print(f"uploaded PDF {len(pdf) / 2**20:8.1f} MiB   searchable PDF {len(out) / 2**20:8.1f} MiB")
    print(f"size ratio (searchable / uploaded): {len(out) / len(pdf):.3f}")
    figures = {
        "pages": args.pages,
        "ocr_pages": args.ocr_pages,
        "ocr_s_per_page": ocr,
        "build_s_per_page": build,
        "build_over_ocr": build / ocr,
        "uploaded_bytes": len(pdf),
        "searchable_bytes": len(out),
        "size_ratio": len(out) / len(pdf),
    }
    harness.write(figures, args, harness.card())


if __name__ == "__main__":
    main()
