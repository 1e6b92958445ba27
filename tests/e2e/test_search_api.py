"""Search over a tenant's read pages on the real stack (Postgres full-text search): a phrase
known to be on page N of a real scanned document, read by the real worker, is found on page N
with a box around it on the scan, for its tenant only, and no longer once the job is deleted;
words are stemmed, Chinese is matched as written, hits are ranked and paged; bad queries get
clear 4xx answers."""

from __future__ import annotations

import os
import re

import pymupdf
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, deployment_without_workers
from tests.e2e.conftest import ReadScan, Service
from tests.factories import sample_pages, scanned_pdf
from uocr_client.client import UocrClient
from uocr_core.db import transaction
from uocr_core.models import PageText
from uocr_core.search import index as search_index
from uocr_core.search.index import PageLines

# Lines as the record stage stores them: (text, box in the page's pixels), on 1000 x 1400 pages.
PAGES = {
    1: [("Minutes of the archive board", (100, 100, 900, 140))],
    2: [
        ("The board runs the archive and keeps", (100, 100, 900, 140)),
        ("the deed of gift for every collection", (100, 150, 900, 190)),
    ],
    3: [("档案馆保存捐赠契约", (100, 100, 460, 140)), ("running costs", (100, 150, 400, 190))],
}


def _index(stack: Stack, tenant_id: str, job_id: str) -> None:
    with transaction(stack.sessions) as session:
        search_index.add_pages(
            session,
            tenant_id=tenant_id,
            job_id=job_id,
            pages=[PageLines(n, lines, 1000, 1400) for n, lines in PAGES.items()],  # type: ignore[arg-type]
            language=stack.settings.search.language,
        )


def test_search_finds_ranks_pages_and_keeps_to_its_tenant(
    stack: Stack, service_urls: ServiceUrls
) -> None:
    with deployment_without_workers(stack, service_urls) as idle:
        owner, other = idle.new_tenant(), idle.new_tenant()
        auth = {"Authorization": f"Bearer {owner.api_key}"}
        other_auth = {"Authorization": f"Bearer {other.api_key}"}
        with TestClient(create_app(idle.settings)) as client:

            def submitted(headers: dict[str, str]) -> str:
                pdf = scanned_pdf(sample_pages(3, lines=1))
                answer = client.post(
                    "/v1/jobs", files={"file": ("deeds.pdf", pdf)}, headers=headers
                )
                assert answer.status_code == 202, answer.text
                return str(answer.json()["id"])

            job, others_job = submitted(auth), submitted(other_auth)
            _index(idle, owner.tenant_id, job)
            _index(idle, other.tenant_id, others_job)

            def search(q: str, headers: dict[str, str] = auth, **params: str | int) -> dict:  # type: ignore[type-arg]
                answer = client.get("/v1/search", params={"q": q, **params}, headers=headers)
                assert answer.status_code == 200, answer.text
                return answer.json()  # type: ignore[no-any-return]

            # A phrase on page 2 only: the box covers "deed of gift" on its second line.
            found = search('"deed of gift"')
            assert [(h["job_id"], h["page"]) for h in found["hits"]] == [(job, 2)]
            hit = found["hits"][0]
            assert hit["snippet"] == "the deed of gift for every collection"
            assert hit["source"] == "deeds.pdf" and (hit["width"], hit["height"]) == (1000, 1400)
            [(x1, y1, x2, y2)] = hit["boxes"]
            line = "the deed of gift for every collection"
            share = 800 / len(line)
            assert (y1, y2) == (150, 190)
            assert x1 == pytest.approx(100 + share * line.index("deed"), abs=0.1)
            assert x2 == pytest.approx(100 + share * (line.index("gift") + 4), abs=0.1)
            assert hit["image_url"].endswith(f"/v1/jobs/{job}/pages/2/image")

            # Stemmed: "running" finds "runs" (page 2) and "running" (page 3); the page where
            # the words stand together ranks first.
            assert {h["page"] for h in search("running")["hits"]} == {2, 3}
            ranked = search("archive board")["hits"]
            assert [h["page"] for h in ranked] == [1, 2]
            assert ranked[0]["rank"] > ranked[1]["rank"]
            # Chinese, matched as written anywhere in a line, and its box.
            [chinese] = search("捐赠契约")["hits"]
            assert chinese["page"] == 3 and chinese["snippet"] == "档案馆保存捐赠契约"
            [(cx1, _, cx2, _)] = chinese["boxes"]
            assert (cx1, cx2) == pytest.approx((100 + 40 * 5, 460), abs=0.1)
            assert search("契约档案")["hits"] == []  # the characters, not in that order
            # One character, wherever it stands in a run (first, inside, last).
            for char, at in (("档", 0), ("保", 3), ("约", 8)):
                [single] = search(char)["hits"]
                [(sx1, _, sx2, _)] = single["boxes"]
                assert single["page"] == 3 and (sx1, sx2) == (100 + 40 * at, 140 + 40 * at)
            # Excluded words, a job's pages, one page, paging.
            assert [h["page"] for h in search("archive -minutes")["hits"]] == [2]
            assert [h["page"] for h in search("archive", job_id=job, page=1)["hits"]] == [1]
            first = search("archive", limit=1)
            assert len(first["hits"]) == 1 and first["next_cursor"]
            rest = search("archive", limit=1, cursor=first["next_cursor"])
            assert [h["page"] for h in first["hits"] + rest["hits"]] == [1, 2]
            assert rest["next_cursor"] is None

            # Each tenant its own: the other tenant finds its own job's page, never this one's.
            theirs = search('"deed of gift"', other_auth)["hits"]
            assert [(h["job_id"], h["page"]) for h in theirs] == [(others_job, 2)]

            refusals: list[tuple[dict[str, str | int], str]] = [
                ({"q": ""}, "query.q: String should have at least 1 character"),
                ({"q": "   "}, "q is empty"),
                ({"q": "x" * 10_240}, "query.q: String should have at most 500 characters"),
                ({"q": "?!... -- ()"}, "only punctuation"),
                ({"q": "deed\x00gift"}, "control character"),
                ({"q": "the of"}, "too common"),
                ({"q": "-minutes"}, "only leaves words out"),
                ({"q": "deed", "cursor": "bm90IG9uZQ"}, "cursor"),
                ({"q": "deed", "job_id": "not-a-job"}, "job_id"),
                ({"q": "deed", "limit": 1000}, "limit"),
            ]
            for params, words in refusals:
                refused = client.get("/v1/search", params=params, headers=auth)
                assert refused.status_code == 422, (params, refused.text)
                assert words in refused.text, refused.text
            assert client.get("/v1/search", headers=auth).status_code == 422  # no q
            assert client.get("/v1/search", params={"q": "deed"}).status_code == 401

            # Deleted: its pages are no longer found, at once.
            assert client.delete(f"/v1/jobs/{job}", headers=auth).status_code in (200, 202, 204)
            assert search('"deed of gift"')["hits"] == []
            with idle.sessions() as session:
                kept = session.scalars(select(PageText.job_id)).all()
            assert set(kept) == {others_job}


def test_a_phrase_on_page_n_of_a_real_scan_is_found_there_with_its_box(
    service: Service, real_scan_read: ReadScan
) -> None:
    """r-admin's three real pages, scanned as scanners degrade them and read by the real
    worker: a phrase from one page's own text is found on that page, inside a box drawn where
    the phrase lies on the scan; not by another tenant."""
    tenant, job_id, scanned = real_scan_read.tenant, real_scan_read.job_id, real_scan_read.scanned
    source = scanned.source
    stranger = service.stack.new_tenant()
    with service.client(tenant) as client:
        for n, page_index in enumerate(source.pages, 1):
            phrase, where = _phrase_only_on(source.pdf_path, source.pages, page_index)
            found = client.get("/v1/search", params={"q": f'"{phrase}"', "job_id": job_id})
            assert found.status_code == 200, found.text
            hits = found.json()["hits"]
            assert [h["page"] for h in hits] == [n], (phrase, hits)
            hit = hits[0]
            scale = hit["width"] / where[2]  # scan pixels a PDF point
            x0, y0, x1, y1 = (v * scale for v in where[:2] + where[3:5])
            cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
            inside = [b for b in hit["boxes"] if b[1] <= cy <= b[3] and b[0] <= cx <= b[2]]
            assert inside, (phrase, (cx, cy), hit["boxes"])
    with service.client(stranger) as client:
        assert client.get("/v1/search", params={"q": f'"{phrase}"'}).json()["hits"] == []
    # The Python client follows the cursor: a word on every page, one hit a request.
    common = set.intersection(
        *({w.lower() for w in layer.split() if re.fullmatch(r"[A-Za-z]{6,}", w)}
          for layer in scanned.text_layers)
    )  # fmt: skip
    with UocrClient(service.api_url, tenant.api_key) as uocr:
        word = sorted(common)[0]
        pages = [h.page for h in uocr.search(word, job_id=job_id, page_size=1)]
        assert sorted(pages) == [1, 2, 3], (word, pages)


def _phrase_only_on(
    pdf_path: os.PathLike[str], pages: tuple[int, ...], page_index: int
) -> tuple[str, tuple[float, ...]]:
    """Three words in a row on one line of the page (long, plain words: what OCR reads
    right) that no other page has, and where they lie: (x0, y0, page width, x1, y1)."""
    with pymupdf.open(pdf_path) as pdf:
        texts = {i: " ".join(pdf.load_page(i).get_text().split()) for i in pages}
        page = pdf.load_page(page_index)
        words = page.get_text("words", sort=False)
        for a, b, c in zip(words, words[1:], words[2:], strict=False):
            trio = [w[4] for w in (a, b, c)]
            same_line = a[5:7] == b[5:7] == c[5:7]
            plain = all(re.fullmatch(r"[A-Za-z]{5,}", w) for w in trio)
            phrase = " ".join(trio)
            elsewhere = any(phrase in t for i, t in texts.items() if i != page_index)
            if same_line and plain and not elsewhere:
                return phrase, (a[0], a[1], page.rect.width, c[2], c[3])
    raise AssertionError(f"page {page_index} has no three plain words in a row")
