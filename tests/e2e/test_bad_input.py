"""Every refused upload says what is wrong and leaves no job and no object behind."""

from __future__ import annotations

import io

import pymupdf
import pytest
from PIL import Image
from sqlalchemy import func, select

from ocr_api.core.models import Job
from tests.e2e.conftest import Service
from tests.e2e.helpers import submit
from tests.factories import sample_pages, scanned_pdf


def _pdf(pages: int, **save: object) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"page {n + 1}")
    return doc.tobytes(**save)


def _encrypted_pdf() -> bytes:
    aes_256 = pymupdf.PDF_ENCRYPT_AES_256  # type: ignore[attr-defined]
    return _pdf(1, encryption=aes_256, owner_pw="o", user_pw="secret")


def _big_png() -> bytes:
    noise = Image.effect_noise((1500, 1500), 100).convert("RGB")  # incompressible: > 3 MiB
    buffer = io.BytesIO()
    noise.save(buffer, format="PNG")
    return buffer.getvalue()


CASES = [
    ("corrupt", b"%PDF-1.7\n" + b"\x00garbage" * 50, {}, 422, "not a readable PDF"),
    ("encrypted", _encrypted_pdf(), {}, 422, "encrypted"),
    ("empty", b"", {}, 422, "empty"),
    ("unsupported", b"PK\x03\x04 a zip or office file", {}, 415, "unsupported file type"),
    ("too many pages", _pdf(21), {}, 413, "limit is 20 pages"),
    ("too large", _big_png(), {}, 413, "limit"),
    ("bad page range", _pdf(3), {"pages": "2-9"}, 422, "outside the document's pages 1-3"),
    ("private webhook", _pdf(1), {"webhook_url": "http://10.1.2.3/hook"}, 422, "private"),
    ("metadata not json", _pdf(1), {"metadata": "{oops"}, 422, "metadata must be a JSON object"),
]


@pytest.mark.parametrize(
    ("case", "data", "form", "status", "message"), CASES, ids=[case[0] for case in CASES]
)
def test_bad_upload_is_refused_and_nothing_is_kept(
    service: Service, case: str, data: bytes, form: dict[str, str], status: int, message: str
) -> None:
    tenant = service.stack.new_tenant()
    with service.client(tenant) as client:
        response = submit(client, data, f"{case}.pdf", None, **form)
    assert response.status_code == status, response.text
    assert message in response.json()["detail"]
    with service.stack.sessions() as session:
        jobs = session.scalar(select(func.count()).where(Job.tenant_id == tenant.tenant_id))
    assert jobs == 0
    listed = service.stack.store.client.list_objects_v2(Bucket=service.stack.store.bucket)
    stray = [o["Key"] for o in listed.get("Contents", []) if tenant.tenant_id in o["Key"]]
    assert stray == []
    all_inputs = {
        o["Key"].split("/")[1] for o in listed.get("Contents", []) if o["Key"].startswith("jobs/")
    }
    with service.stack.sessions() as session:
        known = set(session.scalars(select(Job.id)))
    assert all_inputs <= known  # every stored object belongs to a recorded job


def test_object_submit_reads_only_the_tenants_inbox(service: Service) -> None:
    tenant, other = service.stack.new_tenant(), service.stack.new_tenant()
    pdf = scanned_pdf(sample_pages(1, lines=2))
    service.stack.store.put(f"inbox/{tenant.tenant_id}/scan.pdf", pdf)
    with service.client(tenant) as client:
        ok = client.post("/v1/jobs", json={"object_key": f"inbox/{tenant.tenant_id}/scan.pdf"})
    with service.client(other) as client:
        stolen = client.post("/v1/jobs", json={"object_key": f"inbox/{tenant.tenant_id}/scan.pdf"})
    assert ok.status_code == 202, ok.text
    assert stolen.status_code == 404
