"""A long document (300 pages here; 3,000 in bench/service/assembly_bench.py) through the page
groups with the simulated engine: every page once and in order in every output, the results
streamed from their objects into each format."""

from __future__ import annotations

import json

import pymupdf

from ocr_worker.engines.simulated import SimulatedEngine
from uocr_core import object_keys
from uocr_core.settings import SimulatedEngineSettings

PAGES = 300


def test_every_page_once_and_in_order_in_every_output(harness) -> None:  # type: ignore[no-untyped-def]
    engine = SimulatedEngine(
        SimulatedEngineSettings(seconds_per_page=0, tokens_per_page=60, blocks_per_page=3)
    )
    job_id = harness.submit(PAGES)
    harness.drain(engine)
    job = harness.job(job_id)
    assert (job.status, job.pages_done) == ("succeeded", PAGES)
    numbers = list(range(1, PAGES + 1))

    def result(fmt: str) -> str:
        return harness.store.get(object_keys.result_key(job_id, fmt)).decode()

    document = json.loads(result("json"))
    assert [p["page"] for p in document["pages"]] == numbers
    assert (document["pages_total"], document["status"]) == (PAGES, "succeeded")
    lines = [json.loads(line) for line in result("jsonl").splitlines()]
    assert [p["page"] for p in lines] == numbers and lines == document["pages"]
    markdown = result("markdown")
    markers = [int(chunk.split(" -->")[0]) for chunk in markdown.split("<!-- page ")[1:]]
    assert markers == numbers
    assert [p["markdown"] in markdown for p in lines] == [True] * PAGES
    assert result("text") == "\n\f".join(p["text"] for p in lines) + "\n"  # pdftotext's way
    assert result("hocr").count('class="ocr_page"') == PAGES
    chunks = [json.loads(line) for line in result("chunks").splitlines()]
    assert sorted({page for c in chunks for page in c["pages"]}) == numbers
    spans = [span for c in chunks for span in c["spans"]]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # none twice
    assert spans[-1][1] <= len(markdown)
    pdf = harness.store.get(object_keys.result_key(job_id, "pdf"))
    with pymupdf.open(stream=pdf, filetype="pdf") as searchable:
        assert searchable.page_count == PAGES
        for number in (1, PAGES):  # each scan in its place, with a text layer over it
            text = searchable[number - 1].get_text()
            assert f"page {number}\n" in text and len(text) > len(f"page {number}") + 50
