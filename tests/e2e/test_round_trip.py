"""A scanned PDF through the whole service: API → S3 → Celery worker → results → webhook."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pymupdf
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import OCR_WORKER_NAME, Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import character_error_rate, sample_pages, scanned_pdf
from uocr_core.webhooks.signing import SIGNATURE_HEADER, verify

# Clean renders read at 0% CER (docs/cpu-engine.md); scanner noise and JPEG add a few
# confusions such as '1.' -> '1:'. 5% allows ~25 wrong characters on a 500-character page,
# while a dropped line (~60 characters, >10%) or pages swapped (~90%) fail.
MAX_CER = 0.05
ALERT_RULES = Path(__file__).resolve().parents[2] / "ops" / "prometheus-alerts.yml"
# The workers' own metrics, not the API's: checked against a worker in tests/e2e/test_alerts.py.
WORKER_METRICS = set(re.findall(r"\buocr_(?:worker|gpu)_[a-z_]+", ALERT_RULES.read_text()))


def test_scanned_pdf_comes_back_page_by_page_with_a_signed_webhook(service: Service) -> None:
    tenant = service.stack.new_tenant()
    pages = sample_pages(5, seed=11)
    with service.client(tenant) as client:
        accepted = submit(
            client,
            scanned_pdf(pages, seed=11),
            webhook_url=service.receiver.url("/hooks/a"),
            priority="interactive",
            metadata=json.dumps({"box": "A-17"}),
        )
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        assert accepted.json()["status_url"] == f"{service.api_url}/v1/jobs/{job_id}"
        assert accepted.headers["Location"] == accepted.json()["status_url"]
        job, progress_seen = wait_for(client, job_id)

        assert job["status"] == "succeeded", job
        assert (job["pages_total"], job["pages_done"], job["pages_failed"]) == (5, 5, 0)
        # Groups of 3 with 1 page of overlap: pages 1-3, then 4-5. A poll sees 3 before 5.
        assert job["groups_total"] == 2
        assert 3 in progress_seen and progress_seen[-1] == 5, progress_seen
        assert [p["page"] for p in job["pages"]] == [1, 2, 3, 4, 5]
        assert all(p["status"] == "succeeded" and p["duration_ms"] > 0 for p in job["pages"])

        result = client.get(f"/v1/jobs/{job_id}/result").raise_for_status().json()
        assert [p["page"] for p in result["pages"]] == [1, 2, 3, 4, 5]
        assert result["metadata"] == {"box": "A-17"}
        for expected_lines, page in zip(pages, result["pages"], strict=True):
            cer = character_error_rate("\n".join(expected_lines), page["text"])
            assert cer < MAX_CER, (page["page"], cer, page["text"])
            assert page["blocks"] and all(len(b["bbox"]) == 4 for b in page["blocks"])

        markdown = client.get(f"/v1/jobs/{job_id}/result", params={"format": "markdown"}).text
        assert markdown.index("<!-- page 1 -->") < markdown.index("<!-- page 5 -->")
        assert "Page 4 of the archive" in markdown
        text = client.get(f"/v1/jobs/{job_id}/result", params={"format": "text"}).text
        assert text.count("\f") == 4
        pdf = client.get(f"/v1/jobs/{job_id}/result", params={"format": "pdf"})
        assert pdf.headers["content-type"] == "application/pdf"
        with pymupdf.open(stream=pdf.content, filetype="pdf") as searchable:
            assert searchable.page_count == 5 and all(p.get_images() for p in searchable)
            for expected_lines, page in zip(pages, searchable, strict=True):
                assert character_error_rate("\n".join(expected_lines), page.get_text()) < MAX_CER

        hocr = client.get(f"/v1/jobs/{job_id}/result", params={"format": "hocr"})
        assert hocr.headers["content-type"].startswith("text/html")
        hocr_pages = ET.fromstring(hocr.content).findall(".//{*}div[@class='ocr_page']")
        assert [p.attrib["id"] for p in hocr_pages] == [f"page_{n}" for n in range(1, 6)]
        for expected_lines, hocr_page in zip(pages, hocr_pages, strict=True):
            words = " ".join(
                w.text or "" for w in hocr_page.iterfind(".//{*}span[@class='ocrx_word']")
            )
            assert character_error_rate("\n".join(expected_lines), words) < MAX_CER

        alto = client.get(f"/v1/jobs/{job_id}/result", params={"format": "alto"})
        assert alto.headers["content-type"].startswith("application/xml")
        alto_pages = ET.fromstring(alto.content).findall(".//{*}Page")
        assert [p.attrib["ID"] for p in alto_pages] == [f"page_{n}" for n in range(1, 6)]
        for expected_lines, alto_page in zip(pages, alto_pages, strict=True):
            words = " ".join(s.attrib["CONTENT"] for s in alto_page.iterfind(".//{*}String"))
            assert character_error_rate("\n".join(expected_lines), words) < MAX_CER

        chunks = client.get(f"/v1/jobs/{job_id}/result", params={"format": "chunks"})
        assert chunks.headers["content-type"].startswith("application/vnd.uocr.chunks+jsonl")
        markdown = client.get(f"/v1/jobs/{job_id}/result", params={"format": "markdown"}).text
        records = [json.loads(line) for line in chunks.text.splitlines()]
        assert sorted({p for r in records for p in r["pages"]}) == [1, 2, 3, 4, 5]
        for record in records:  # each chunk is its spans of the Markdown, its boxes on its pages
            pieces = [markdown[a:b] for a, b in record["spans"]]
            assert "".join(record["text"].split()) == "".join("".join(pieces).split())
            assert {box["page"] for box in record["boxes"]} <= set(record["pages"])

        page_two = client.get(f"/v1/jobs/{job_id}/pages/2").raise_for_status().json()
        assert page_two["page"] == 2 and "Page 2" in page_two["text"]

        link = client.get(f"/v1/jobs/{job_id}/result/link").raise_for_status().json()
        assert httpx.get(link["url"]).json()["job_id"] == job_id

    hooks = wait_until(lambda: service.receiver.for_path("/hooks/a"), 30, what="the webhook")
    hook = hooks[0]
    assert verify(tenant.webhook_secret, hook.body, hook.headers[SIGNATURE_HEADER])
    assert not verify("whsec_someone-else", hook.body, hook.headers[SIGNATURE_HEADER])
    assert hook.event["type"] == "job.succeeded"
    assert hook.event["data"]["job_id"] == job_id
    assert hook.event["data"]["result_url"].endswith(f"/v1/jobs/{job_id}/result")

    metrics = httpx.get(f"{service.api_url}/metrics").text
    assert 'uocr_jobs{status="succeeded"}' in metrics
    # The series exists before any page has failed (other tests may have failed some since).
    assert re.search(r'^uocr_pages\{status="failed"\} \d', metrics, re.MULTILINE)
    exported = {s.name for f in text_string_to_metric_families(metrics) for s in f.samples}
    alerted = set(re.findall(r"\buocr_[a-z_]+", ALERT_RULES.read_text())) - WORKER_METRICS
    assert alerted and alerted <= exported, alerted - exported  # every alert can fire
    assert "uocr_page_latency_seconds_count" in metrics
    assert 'uocr_queue_depth{queue="ocr.backlog"}' in metrics

    # Flower, started before the job, saw the worker and this job's page-group tasks.
    workers = httpx.get(f"{service.flower_url}/api/workers", params={"refresh": "true"}).json()
    assert OCR_WORKER_NAME in workers
    tasks = httpx.get(
        f"{service.flower_url}/api/tasks", params={"taskname": "ocr.page_group"}
    ).json()
    mine = [t for t in tasks.values() if job_id in (t.get("args") or "")]
    assert len(mine) == 2 and {t["worker"] for t in mine} == {OCR_WORKER_NAME}


def test_a_blank_sheet_is_flagged_in_the_status_the_result_and_the_webhook(
    service: Service,
) -> None:
    """A webhook consumer must not take a document with a page that came back empty for a
    clean success: the job counts it (pages_flagged), the page says why."""
    tenant = service.stack.new_tenant()
    pages = sample_pages(2, lines=3, seed=12)
    with service.client(tenant) as client:
        accepted = submit(
            client,
            scanned_pdf([pages[0], [" "], pages[1]], seed=12),
            webhook_url=service.receiver.url("/hooks/flagged"),
        )
        job, _ = wait_for(client, accepted.json()["id"])
        assert (job["status"], job["pages_failed"], job["pages_flagged"]) == ("succeeded", 0, 1)
        assert [p["warnings"] for p in job["pages"]] == [[], ["empty_page"], []]
        result = client.get(f"/v1/jobs/{job['id']}/result").raise_for_status().json()
        assert result["pages_flagged"] == 1
    hooks = wait_until(lambda: service.receiver.for_path("/hooks/flagged"), 30, what="a webhook")
    assert hooks[0].event["data"]["pages_flagged"] == 1


def test_readyz_reports_every_dependency(service: Service) -> None:
    ready = httpx.get(f"{service.api_url}/readyz").json()
    assert ready == {
        "ready": True,
        "checks": {"database": "ok", "broker": "ok", "object_store": "ok"},
    }
