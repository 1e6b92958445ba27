"""Every refused upload says what is wrong and leaves no job and no object behind."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator

import httpx
import psutil
import pymupdf
import pytest
from PIL import Image
from sqlalchemy import func, select

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit
from tests.factories import sample_pages, scanned_pdf
from uocr_core.models import Job


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


def _zip_with_pdf_header() -> bytes:
    """A zip whose first stored member starts with "%PDF-": the old sniffer took it for a PDF."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("a.pdf", _pdf(1))
    return buffer.getvalue()


def _truncated_jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((600, 800), 60).convert("RGB").save(buffer, format="JPEG")
    return buffer.getvalue()[:-4096]


def _deep_metadata(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def _large_metadata() -> str:
    return json.dumps({"note": "x" * 20_000})


CASES = [
    ("corrupt", b"%PDF-1.7\n" + b"\x00garbage" * 50, {}, 422, "not a readable PDF"),
    ("encrypted", _encrypted_pdf(), {}, 422, "encrypted"),
    ("truncated jpeg", _truncated_jpeg(), {}, 422, "not a readable JPEG"),
    ("empty", b"", {}, 422, "empty"),
    ("unsupported", b"PK\x03\x04 a zip or office file", {}, 415, "unsupported file type"),
    ("too many pages", _pdf(21), {}, 413, "limit is 20 pages"),
    ("too large", _big_png(), {}, 413, "limit"),
    ("bad page range", _pdf(3), {"pages": "2-9"}, 422, "outside the document's pages 1-3"),
    ("private webhook", _pdf(1), {"webhook_url": "http://10.1.2.3/hook"}, 422, "private"),
    ("metadata not json", _pdf(1), {"metadata": "{oops"}, 422, "metadata must be a JSON object"),
    ("zip with a pdf header", _zip_with_pdf_header(), {}, 415, "a ZIP archive"),
    ("metadata too deep", _pdf(1), {"metadata": _deep_metadata(100_000)}, 422, "metadata"),
    ("metadata nested", _pdf(1), {"metadata": _deep_metadata(9)}, 422, "deeper than 8 levels"),
    ("metadata too large", _pdf(1), {"metadata": _large_metadata()}, 422, "16384-byte limit"),
    ("nul in metadata", _pdf(1), {"metadata": '{"a": "x\\u0000y"}'}, 422, "control characters"),
    ("nul in pages", _pdf(3), {"pages": "1\x00"}, 422, "control characters"),
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


def test_a_nul_in_the_file_name_is_refused_not_a_500(service: Service) -> None:
    tenant = service.stack.new_tenant()
    # Built by hand: httpx would percent-escape the NUL, as browsers do; other clients do not.
    body = (
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="report\x00.pdf"\r\n'
        b"Content-Type: application/pdf\r\n\r\n" + _pdf(1) + b"\r\n--b--\r\n"
    )
    with service.client(tenant) as client:
        headers = {"Content-Type": "multipart/form-data; boundary=b"}
        response = client.post("/v1/jobs", content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert "control characters" in response.json()["detail"]


def _api_process(service: Service) -> psutil.Process:
    port = service.api_url.rsplit(":", 1)[1]
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline[2:4] == ["uocr_cli", "api"] and port in cmdline:  # `uocr api`, one process
            return process
    raise LookupError("the API process")


def _chunks(total: int, sent: list[int]) -> Iterator[bytes]:
    """A body with no Content-Length (chunked), counting what the server let through."""
    chunk = b"x" * (256 * 1024)
    while sent[0] < total:
        sent[0] += len(chunk)
        yield chunk


@pytest.mark.parametrize("content_type", ["application/json", "multipart/form-data; boundary=b"])
def test_a_chunked_body_is_cut_off_at_the_limit_while_it_streams(
    service: Service, content_type: str
) -> None:
    """3 MiB upload limit (a JSON body: 32 KiB): the API stops taking the body in at the limit
    and answers 413; uvicorn discards the rest unread, so its memory stays flat (it grew by
    483 MB for a 160 MB chunked body, which was then accepted)."""
    tenant = service.stack.new_tenant()
    api = _api_process(service)
    rss_before = api.memory_info().rss
    sent = [0]
    with service.client(tenant) as client:
        try:
            response = client.post(
                "/v1/jobs",
                content=_chunks(160 * 1024 * 1024, sent),
                headers={"Content-Type": content_type},
            )
            status = response.status_code
        except httpx.TransportError:  # refused mid-stream: the server closed the connection
            status = 413
    assert status == 413
    assert api.memory_info().rss - rss_before < 48 * 1024 * 1024
    with service.stack.sessions() as session:
        assert session.scalar(select(func.count()).where(Job.tenant_id == tenant.tenant_id)) == 0
