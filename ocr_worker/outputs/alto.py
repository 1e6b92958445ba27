"""ALTO XML (v4), what library and archive digitisation delivers to its repositories (with METS):
one file for the document, a ``Page`` a page in order, each with its text blocks, lines and
strings placed in the scan's geometry (pixels of the page as rendered for reading), the reading
order, and the engine and model version that read it.

Written page by page as results stream in, like hOCR. Engines give a box a block: lines lie in
equal bands of their block's box and a string's box is its share of the line's width by
characters (``text_layer``), as in hOCR. The reading order is the order of the blocks in the
file, and each block names the next one on its page (``IDNEXT``): ALTO's ``ReadingOrder``
element comes before the pages, which a stream cannot know yet. A failed or canceled page is
still listed, empty, with ``QUALITY`` and the reason: no page is dropped.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from xml.sax.saxutils import quoteattr

from ocr_worker.outputs.text_layer import PlacedLine, placed_lines
from uocr_core.contracts import PageResult

NAMESPACE = "http://www.loc.gov/standards/alto/ns-v4#"
SCHEMA = "http://www.loc.gov/alto/v4/alto-4-4.xsd"
TAIL = "</Layout>\n</alto>\n"
_QUALITY = {"failed": "Damaged", "canceled": "Missing"}
# Characters XML 1.0 cannot carry (a recogniser may emit one): dropped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _software_version() -> str:
    try:
        return version("uocr")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def head(document: dict[str, Any]) -> str:
    """The document's opening, before its pages: ``document`` is result.json's head (its
    ``source``, ``engine`` and ``model_version``)."""
    engine, model = document.get("engine") or "", document.get("model_version") or ""
    settings = f"engine={engine}; model_version={model}"
    when = datetime.now(UTC).replace(microsecond=0).isoformat()
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<alto xmlns="{NAMESPACE}" xmlns:xlink="http://www.w3.org/1999/xlink"'
        ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
        f' xsi:schemaLocation="{NAMESPACE} {SCHEMA}" SCHEMAVERSION="4.4">\n'
        "<Description>\n<MeasurementUnit>pixel</MeasurementUnit>\n"
        f"<sourceImageInformation><fileName>{_text(document.get('source') or '')}</fileName>"
        "</sourceImageInformation>\n"
        '<OCRProcessing ID="OCR_1"><ocrProcessingStep>'
        f"<processingDateTime>{when}</processingDateTime>"
        f"<processingStepSettings>{_text(settings)}</processingStepSettings>"
        "<processingSoftware><softwareName>uocr</softwareName>"
        f"<softwareVersion>{_text(_software_version())}</softwareVersion></processingSoftware>"
        "</ocrProcessingStep></OCRProcessing>\n</Description>\n<Layout>\n"
    )


def page(result: PageResult) -> str:
    n = result.page
    ident = f'ID="page_{n}" PHYSICAL_IMG_NR="{n}" PRINTED_IMG_NR="{n}"'
    if result.status != "succeeded" or not (result.width and result.height):
        error = _NOT_XML.sub("", result.error or "")[:500]
        reason = f" QUALITY_DETAIL={quoteattr(error)}" if error else ""
        quality = _QUALITY.get(result.status, "Missing")
        return f'<Page {ident} QUALITY="{quality}"{reason}/>\n'
    width, height = result.width, result.height
    blocks = [
        (f"block_{n}_{k}", block.confidence, lines)
        for k, block in enumerate(result.blocks, 1)
        if (lines := placed_lines(block, width, height))
    ]
    body = "".join(
        _block(ident_, confidence, lines, blocks[i + 1][0] if i + 1 < len(blocks) else None)
        for i, (ident_, confidence, lines) in enumerate(blocks)
    )
    size = f'WIDTH="{width}" HEIGHT="{height}"'
    return (
        f'<Page {ident} {size}>\n<PrintSpace HPOS="0" VPOS="0" {size}>\n'
        f"{body}</PrintSpace>\n</Page>\n"
    )


def _block(
    ident: str, confidence: float | None, lines: list[PlacedLine], following: str | None
) -> str:
    box = _box(_union([line.bbox for line in lines]))
    after = f' IDNEXT="{following}"' if following else ""
    wc = f' WC="{min(max(confidence, 0.0), 1.0):.3f}"' if confidence is not None else ""
    body = "".join(_line(f"{ident}_{m}", line, wc) for m, line in enumerate(lines, 1))
    return f'<TextBlock ID="{ident}" {box}{after}>\n{body}</TextBlock>\n'


def _line(ident: str, line: PlacedLine, wc: str) -> str:
    x1, y1, x2, y2 = line.bbox
    per_char = (x2 - x1) / max(len(line.text), 1)
    parts, start = [], 0
    for word in line.text.split(" "):
        if word:
            left = x1 + per_char * start
            box = _box((left, y1, left + per_char * len(word), y2))
            parts.append(f"<String CONTENT={quoteattr(_NOT_XML.sub('', word))} {box}{wc}/>")
        start += len(word) + 1
    return f'<TextLine ID="{ident}" {_box(line.bbox)}>{"<SP/>".join(parts)}</TextLine>\n'


def _union(boxes: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _box(bbox: tuple[float, float, float, float]) -> str:
    x1, y1, x2, y2 = (round(v) for v in bbox)
    return f'HPOS="{x1}" VPOS="{y1}" WIDTH="{max(x2 - x1, 0)}" HEIGHT="{max(y2 - y1, 0)}"'


def _text(value: str) -> str:
    return _NOT_XML.sub("", value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
