"""ALTO XML (ocr_worker/outputs/alto.py): valid against the ALTO 4.4 schema (tests/schemas/),
every page once and in order with its size, blocks, lines and strings inside the page, the
reading order, what read it; a failed page listed with the reason. Then a real scanned
document of the accuracy set through ``uocr run``."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from bench.accuracy.corpus import CI_DOCUMENTS
from bench.accuracy.runner import scan
from ocr_worker.embedded import run_document
from ocr_worker.outputs import alto
from tests.factories import require_fetched
from uocr_core.contracts import Block, PageResult
from uocr_core.settings import Settings

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
NS = {"a": alto.NAMESPACE}


def _schema() -> etree.XMLSchema:
    """ALTO 4.4 with its xlink import pointed at the local copy (no network)."""
    xsd = etree.parse(str(SCHEMAS / "alto-4-4.xsd"))
    for imported in xsd.getroot().iter("{http://www.w3.org/2001/XMLSchema}import"):
        if imported.get("namespace") == "http://www.w3.org/1999/xlink":
            imported.set("schemaLocation", "xlink.xsd")
    return etree.XMLSchema(etree.fromstring(etree.tostring(xsd), base_url=str(SCHEMAS) + "/"))


def _valid(document: bytes) -> etree._Element:
    root = etree.fromstring(document)
    schema = _schema()
    assert schema.validate(root), schema.error_log
    return root


def test_a_document_is_valid_alto_with_its_pages_lines_and_strings_in_place() -> None:
    pages = [
        PageResult(
            page=1,
            status="succeeded",
            width=1000,
            height=1400,
            blocks=[
                Block(label="title", bbox=(100, 100, 900, 160), text="Annual & <report>"),
                Block(label="text", bbox=(100, 200, 900, 400), text="First line\nSecond  one"),
            ],
            engine="rapidocr",
            model_version="default",
        ),
        PageResult(page=2, status="failed", error="page 2 of the PDF is damaged: it draws nothing"),
        PageResult(page=3, status="succeeded", width=1000, height=1400),
    ]
    head = {"source": "minutes & notes.pdf", "engine": "rapidocr", "model_version": "default"}
    document = alto.head(head) + "".join(map(alto.page, pages)) + alto.TAIL
    root = _valid(document.encode())

    assert [p.get("ID") for p in root.iterfind(".//a:Page", NS)] == ["page_1", "page_2", "page_3"]
    first = root.find(".//a:Page[@ID='page_1']", NS)
    assert (first.get("WIDTH"), first.get("HEIGHT")) == ("1000", "1400")
    blocks = first.findall(".//a:TextBlock", NS)
    assert blocks[0].get("IDNEXT") == blocks[1].get("ID")  # the reading order
    strings = [s.get("CONTENT") for s in first.iterfind(".//a:String", NS)]
    assert strings == ["Annual", "&", "<report>", "First", "line", "Second", "one"]
    for string in first.iterfind(".//a:String", NS):
        x, y = float(string.get("HPOS")), float(string.get("VPOS"))
        w, h = float(string.get("WIDTH")), float(string.get("HEIGHT"))
        assert x >= 0 and y >= 0 and x + w <= 1000 and y + h <= 1400
    failed = root.find(".//a:Page[@ID='page_2']", NS)
    assert failed.get("QUALITY") == "Damaged" and "damaged" in failed.get("QUALITY_DETAIL")
    settings = root.findtext(".//a:processingStepSettings", namespaces=NS)
    assert settings == "engine=rapidocr; model_version=default"
    assert root.findtext(".//a:fileName", namespaces=NS) == "minutes & notes.pdf"


def test_a_real_scanned_document_read_by_uocr_run_is_valid_alto(tmp_path: Path) -> None:
    source = CI_DOCUMENTS[0]  # r-admin: English prose, headings, shell commands
    require_fetched(source)
    scanned = scan(source)
    (tmp_path / "scan.pdf").write_bytes(scanned.pdf)
    run_document(tmp_path / "scan.pdf", tmp_path / "out", Settings())
    root = _valid((tmp_path / "out" / "result.alto.xml").read_bytes())

    pages = root.findall(".//a:Page", NS)
    assert [p.get("PHYSICAL_IMG_NR") for p in pages] == ["1", "2", "3"]
    for page, layer in zip(pages, scanned.text_layers, strict=True):
        words = [s.get("CONTENT") for s in page.iterfind(".//a:String", NS)]
        assert len(words) > 100  # a page of prose, read
        # The page's own words are there: most of its text layer's longer words appear.
        known = {w for w in layer.split() if len(w) >= 6 and w.isalpha()}
        assert len(known & set(words)) >= 0.6 * len(known)
