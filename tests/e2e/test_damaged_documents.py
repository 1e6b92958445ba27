"""Documents that are damaged, huge or slow to draw: flagged or refused, never a silent blank
success, never rendered past ``max_render_side``, and never taken from a live worker."""

from __future__ import annotations

import random

import pymupdf
from sqlalchemy import select

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.factories import sample_pages, scanned_pdf
from uocr_core.models import PageGroup


def test_a_truncated_pdf_is_repaired_with_a_warning_and_its_lost_pages_fail(
    service: Service,
) -> None:
    whole = scanned_pdf(sample_pages(4, lines=3))
    truncated = whole[: int(len(whole) * 0.6)]  # pages 3 and 4's images are cut off
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        accepted = submit(client, truncated, "cut.pdf")
        assert accepted.status_code == 202, accepted.text
        job, _ = wait_for(client, accepted.json()["id"], timeout=180)
    pages = {p["page"]: p for p in job["pages"]}
    for n in (1, 2):
        assert pages[n]["status"] == "succeeded"
        assert "repaired_file" in pages[n]["warnings"]
    for n in (3, 4):
        assert pages[n]["status"] == "failed"
        assert "damaged" in (pages[n]["error"] or "")
    # Every page either failed saying why or carries a warning: nothing blank and clean.
    assert all(p["status"] == "failed" or p["warnings"] for p in job["pages"])


def test_a_page_that_cannot_be_drawn_fails_and_a_blank_one_is_read_empty(
    service: Service,
) -> None:
    doc = pymupdf.open(stream=scanned_pdf(sample_pages(1, lines=3)), filetype="pdf")
    broken = doc.new_page()
    broken.insert_text((72, 72), "lost to a broken content stream", fontsize=12)
    doc.update_stream(broken.get_contents()[0], bytes(range(256)) * 20)
    doc.new_page()  # truly blank
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job, _ = wait_for(client, submit(client, doc.tobytes(), "mixed.pdf").json()["id"])
    pages = job["pages"]
    assert [p["status"] for p in pages] == ["succeeded", "failed", "succeeded"], pages
    assert "page 2 of the PDF is damaged" in pages[1]["error"]
    assert pages[2]["warnings"] == ["empty_page"]


def test_a_huge_page_is_rendered_within_max_render_side(service: Service) -> None:
    doc = pymupdf.open()
    doc.new_page(width=14400, height=14400).insert_text((200, 400), "HUGE PAGE", fontsize=300)
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, doc.tobytes(), "huge.pdf").json()["id"]
        job, _ = wait_for(client, job_id, timeout=180)
        page = client.get(f"/v1/jobs/{job_id}/pages/1").json()
    assert job["status"] == "succeeded", job
    limit = service.stack.settings.worker.max_render_side
    assert max(page["width"], page["height"]) <= limit, page  # was 10000 px at a 36-dpi floor


def _slow_pdf(shapes: int = 3000) -> bytes:
    """One page of large overlapping filled triangles: MuPDF takes ~10 s over it, holding the
    GIL the whole time."""
    rng = random.Random(1)
    paths = []
    for _ in range(shapes):
        x, y = rng.random() * 600, rng.random() * 800
        paths.append(
            f"{x:.1f} {y:.1f} m {x + 300:.1f} {y + 1:.1f} l {x + 5:.1f} {y + 400:.1f} l h f"
        )
    doc = pymupdf.open()
    page = doc.new_page(width=600, height=800)
    page.insert_text((10, 10), "x")
    doc.update_stream(page.get_contents()[0], ("0 0 0 rg\n" + "\n".join(paths)).encode())
    return doc.tobytes(deflate=True)


def test_a_render_longer_than_the_lease_keeps_its_group(service: Service) -> None:
    """The lease is 6 s here and the page takes longer than that to draw: rendered in the
    task, the renewal thread starved and the group was re-queued while its worker lived."""
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        job_id = submit(client, _slow_pdf(), "slow.pdf").json()["id"]
        job, _ = wait_for(client, job_id, timeout=300)
    assert job["status"] in ("succeeded", "failed"), job
    assert [p["attempts"] for p in job["pages"]] == [1]
    with service.stack.sessions() as session:
        group = session.scalars(select(PageGroup).where(PageGroup.job_id == job_id)).one()
    assert group.attempts == 1
    control_log = (service.logs / "worker-control.log").read_text()
    assert job_id not in control_log  # never recovered, never re-dispatched
