"""A cache of bare RapidOCR's detections on the scanned pages, for work on reading order without
re-running OCR: ``python -m bench.accuracy.cache [DIR] [--tables]`` (default
/work/tmp/accuracy_cache; ``--tables``: the table pages, ``TABLE_DOCUMENTS``, instead).

For every page, ``<doc>/<page>.json`` (page = 0-based index in the source PDF) holds
``{"doc", "page", "in_ci", "width", "height", "ground_truth", "ground_truth_raw", "boxes",
"txts", "scores"}``; boxes are RapidOCR's quadrilaterals in the pixels of ``<doc>/<page>.jpg``,
which are exactly the pixels uocr's engine sees (its rasteriser at ``worker.render_dpi``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from PIL import Image

from bench.accuracy.corpus import (
    CI_DOCUMENTS,
    EXTRA_DOCUMENTS,
    TABLE_DOCUMENTS,
    SourceDocument,
    fetch,
)
from bench.accuracy.runner import BareRapidOcr, render_like_uocr, scan
from uocr_core.settings import Settings

DEFAULT_DIR = Path("/work/tmp/accuracy_cache")


def write_cache(out_dir: Path, settings: Settings, documents: tuple[SourceDocument, ...]) -> int:
    """Writes every page's detections and image; returns the number of pages."""
    fetch(documents)
    bare = BareRapidOcr()
    count = 0
    for source in documents:
        scanned = scan(source)
        doc_dir = out_dir / source.doc_id
        doc_dir.mkdir(parents=True, exist_ok=True)
        pixels = render_like_uocr(scanned.pdf, settings)
        for index, page_pixels in enumerate(pixels):
            page = source.pages[index]
            # Quality 95: the detections were made on the exact pixels, the JPEG is for viewing.
            Image.fromarray(page_pixels).save(doc_dir / f"{page}.jpg", quality=95)
            record = {
                "doc": source.doc_id,
                "page": page,
                "in_ci": source.in_ci,
                "width": int(page_pixels.shape[1]),
                "height": int(page_pixels.shape[0]),
                "ground_truth": scanned.references[index],
                "ground_truth_raw": scanned.text_layers[index],
                **asdict(bare.detect(page_pixels)),
            }
            text = json.dumps(record, ensure_ascii=False)
            (doc_dir / f"{page}.json").write_text(text, encoding="utf-8")
            count += 1
            print(f"{source.doc_id} page {page}: {len(record['txts'])} lines", flush=True)
    return count


if __name__ == "__main__":
    named = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    target = Path(named[0]) if named else DEFAULT_DIR
    chosen = TABLE_DOCUMENTS if "--tables" in sys.argv else CI_DOCUMENTS + EXTRA_DOCUMENTS
    print(f"{write_cache(target, Settings(), chosen)} pages -> {target}")
