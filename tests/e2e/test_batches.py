"""An overnight backlog through the real stack: a folder submitted with ``uocr submit`` as one
batch while another tenant's app keeps submitting interactive work.

Shown: every document done exactly once, the manifest complete, the batch webhook signed; the
client killed halfway and run again submits nothing twice; the other tenant is never refused
and its jobs finish ahead of the backlog; a long document does not hold short ones behind it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pymupdf
from sqlalchemy import func, select

from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_client import UocrClient, content_key
from uocr_client.archive import batch_key
from uocr_client.keys import file_digest
from uocr_core.models import Job
from uocr_core.webhooks.signing import SIGNATURE_HEADER, verify

DOCUMENTS = 200


def _folder(root: Path) -> Path:
    """200 one-page scans in two sub-folders; each page different, so each is its own key."""
    folder = root / "archive"
    for i in range(DOCUMENTS):
        target = folder / f"box-{i % 2}" / f"scan-{i:03d}.pdf"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(scanned_pdf(sample_pages(1, lines=2, seed=1000 + i), seed=i, dpi=100))
    return folder


def _uocr(service: Service, api_key: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **service.stack.env, "UOCR_URL": service.api_url, "UOCR_API_KEY": api_key}
    return subprocess.Popen(
        [sys.executable, "-m", "uocr_cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _batch_jobs(service: Service, batch_name: str) -> int:
    with service.stack.sessions() as session:
        from uocr_core.models import Batch

        batch_id = session.scalar(select(Batch.id).where(Batch.name == batch_name))
        if batch_id is None:
            return 0
        return (
            session.scalar(select(func.count()).select_from(Job).where(Job.batch_id == batch_id))
            or 0
        )


def test_a_folder_backlog_beside_another_tenants_interactive_work(
    service: Service, tmp_path: Path
) -> None:
    archive_team, app_team = service.stack.new_tenant(), service.stack.new_tenant()
    folder = _folder(tmp_path)
    name = "box 17"
    args = (
        "submit",
        str(folder),
        "--recursive",
        "--batch",
        name,
        "--parallel",
        "4",
        "--metadata",
        json.dumps({"box": 17}),
    )

    # The first run is killed once part of the folder is in the batch.
    first = _uocr(service, archive_team.api_key, *args)
    wait_until(lambda: _batch_jobs(service, name) >= 40, 120, what="40 documents added")
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = _batch_jobs(service, name)
    assert 40 <= before < DOCUMENTS

    # The app's interactive jobs, while the backlog runs.
    with service.client(app_team) as app:
        interactive = []
        for seed in range(3):
            accepted = submit(
                app, scanned_pdf(sample_pages(1, lines=2, seed=seed)), priority="interactive"
            )
            assert accepted.status_code == 202, accepted.text  # never refused
            interactive.append(accepted.json()["id"])

        again = _uocr(service, archive_team.api_key, *args, "--wait")
        out, _ = again.communicate(timeout=900)
        assert again.returncode == 0, out
        # An add the killed run had sent may have landed after it died: never uploaded twice.
        counts = re.search(r"(\d+) uploaded, (\d+) already there", out)
        assert counts, out
        uploaded, already = int(counts.group(1)), int(counts.group(2))
        assert uploaded + already == DOCUMENTS and already >= before, out
        app_jobs = [wait_for(app, job_id, timeout=60)[0] for job_id in interactive]

    with service.client(archive_team) as client:
        batches = client.get("/v1/batches").json()["batches"]
        assert [b["name"] for b in batches] == [name]
        batch = batches[0]
        assert batch["status"] == "succeeded", batch
        assert batch["documents"]["total"] == DOCUMENTS == batch["documents"]["succeeded"]
        assert batch["pages"] == {"total": DOCUMENTS, "done": DOCUMENTS, "failed": 0, "flagged": 0}
        manifest = [
            json.loads(line) for line in client.get(batch["manifest_url"]).text.splitlines()
        ]

    # Exactly once: one job per file, every file's name once in the manifest.
    sources = sorted(entry["source"] for entry in manifest)
    assert sources == sorted(f"box-{i % 2}/scan-{i:03d}.pdf" for i in range(DOCUMENTS))
    assert all(entry["status"] == "succeeded" and entry["results"] for entry in manifest)
    assert _batch_jobs(service, name) == DOCUMENTS
    # The app's work finished ahead of the backlog's end.
    assert all(job["status"] == "succeeded" for job in app_jobs)
    assert max(job["finished_at"] for job in app_jobs) < batch["finished_at"]


def test_the_batch_webhook_and_results_under_the_input_names(
    service: Service, tmp_path: Path
) -> None:
    tenant = service.stack.new_tenant()
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"letter-{i}.pdf").write_bytes(scanned_pdf(sample_pages(1, lines=2, seed=50 + i)))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 not really")
    run = _uocr(
        service,
        tenant.api_key,
        "submit",
        str(folder),
        "--batch",
        "letters",
        "--webhook-url",
        service.receiver.url("/hooks/letters"),
        "--out",
        str(tmp_path / "out"),
    )
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "3 succeeded, 1 failed" in out, out
    for i in range(3):
        markdown = (tmp_path / "out" / f"letter-{i}.md").read_text()
        assert sample_pages(1, lines=2, seed=50 + i)[0][0].split()[0] in markdown
    hooks = wait_until(
        lambda: service.receiver.for_path("/hooks/letters"), 30, what="the batch webhook"
    )
    assert verify(tenant.webhook_secret, hooks[0].body, hooks[0].headers[SIGNATURE_HEADER])
    event = hooks[0].event
    assert event["type"] == "batch.succeeded"
    assert event["data"]["documents"]["failed"] == 1
    with service.client(tenant) as client:
        manifest = client.get(event["data"]["manifest_url"]).text.splitlines()
    broken = next(json.loads(line) for line in manifest if "broken" in line)
    assert broken["status"] == "failed" and "broken.pdf" in broken["error"]


def test_every_file_of_a_box_gets_its_own_result_even_when_files_repeat(
    service: Service, tmp_path: Path
) -> None:
    """A real box: two identical separator sheets, one of them already sent in an earlier
    batch, and a letter both as a PDF and as a PNG page. Each file is a document of the batch
    with its own result; run again, nothing is sent twice."""
    tenant = service.stack.new_tenant()
    folder = tmp_path / "box"
    folder.mkdir()
    sheet = scanned_pdf(sample_pages(1, lines=2, seed=70))
    letter = scanned_pdf(sample_pages(1, lines=2, seed=71))
    (folder / "separator-1.pdf").write_bytes(sheet)
    (folder / "separator-2.pdf").write_bytes(sheet)
    (folder / "letter.pdf").write_bytes(letter)
    with pymupdf.open(stream=letter) as pdf:
        (folder / "letter.png").write_bytes(pdf[0].get_pixmap(dpi=150).tobytes("png"))
    earlier = _uocr(
        service, tenant.api_key, "submit", str(folder / "separator-1.pdf"), "--batch", "earlier"
    )
    out, _ = earlier.communicate(timeout=120)
    assert earlier.returncode == 0, out
    args = ("submit", str(folder), "--batch", "box", "--out", str(tmp_path / "out"))
    run = _uocr(service, tenant.api_key, *args)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "4 uploaded, 0 already there" in out and "4 succeeded" in out, out
    assert _batch_jobs(service, "box") == 4
    expected = {
        "separator-1.md": sample_pages(1, lines=2, seed=70),
        "separator-2.md": sample_pages(1, lines=2, seed=70),
        "letter.pdf.md": sample_pages(1, lines=2, seed=71),
        "letter.png.md": sample_pages(1, lines=2, seed=71),
    }
    for name, pages in expected.items():
        assert pages[0][0].split()[0] in (tmp_path / "out" / name).read_text(), name
    again = _uocr(service, tenant.api_key, *args)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and "0 uploaded, 4 already there" in out, out
    assert _batch_jobs(service, "box") == 4


def test_a_batch_begun_by_an_older_client_is_resumed_not_sent_again(
    service: Service, tmp_path: Path
) -> None:
    """uocr before keys carried the batch and the file's name keyed a file by its bytes and
    options: a box half-sent then, run again with this client, sends only the rest."""
    tenant = service.stack.new_tenant()
    folder = tmp_path / "box"
    folder.mkdir()
    for i in range(2):
        (folder / f"page-{i}.pdf").write_bytes(scanned_pdf(sample_pages(1, lines=2, seed=80 + i)))
    first = folder / "page-0.pdf"
    with UocrClient(service.api_url, tenant.api_key) as client:
        batch = client.create_batch(idempotency_key=batch_key("half"), name="half", open=True)
        earlier = content_key(file_digest(first), {"priority": "backlog"})
        client.add_documents(
            batch.id,
            [
                {
                    "object_key": client.upload(first),
                    "idempotency_key": earlier,
                    "source_name": "page-0.pdf",
                }
            ],
        )
    run = _uocr(service, tenant.api_key, "submit", str(folder), "--batch", "half", "--wait")
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0 and "1 uploaded, 1 already there" in out, out
    assert _batch_jobs(service, "half") == 2


def test_a_long_document_does_not_hold_short_ones_behind_it(service: Service) -> None:
    """The service's worker takes every queue (long ones first); a short pool beside it, as
    the compose file runs one, keeps short documents moving while a long one is read."""
    tenant = service.stack.new_tenant()
    long_pages = int(service.stack.env["UOCR_LONG_DOCUMENT_PAGES"])
    short_pool = service.start_worker("short@e2e", queues="ocr.interactive,ocr.backlog")
    try:
        with service.client(tenant) as client:
            accepted = submit(
                client, scanned_pdf(sample_pages(long_pages + 2, lines=4, seed=9), dpi=100)
            )
            assert accepted.status_code == 202, accepted.text
            long_job = accepted.json()["id"]
            short = [
                submit(client, scanned_pdf(sample_pages(1, lines=2, seed=70 + i))).json()["id"]
                for i in range(3)
            ]
            finished_short = [wait_for(client, job_id, timeout=120)[0] for job_id in short]
            finished_long = wait_for(client, long_job, timeout=300)[0]
    finally:
        short_pool.stop()
    assert max(j["finished_at"] for j in finished_short) < finished_long["finished_at"]


def test_a_presigned_upload_goes_straight_to_the_bucket(service: Service) -> None:
    tenant = service.stack.new_tenant()
    document = scanned_pdf(sample_pages(2, lines=2, seed=31))
    with service.client(tenant) as client:
        too_big = client.post(
            "/v1/uploads", json={"filename": "huge.pdf", "size": target_limit(service) + 1}
        )
        assert too_big.status_code == 413, too_big.text  # refused before a byte is sent
        assert "upload limit" in too_big.json()["detail"]
        declared = {"filename": "big scan.pdf", "size": len(document)}
        target = client.post("/v1/uploads", json=declared).json()
        assert target["object_key"].startswith(f"inbox/{tenant.tenant_id}/")
        # The length is signed (SigV4): a store that checks signatures refuses another length.
        assert "content-length" in target["upload_url"].split("X-Amz-SignedHeaders=")[1]
        put = httpx.put(target["upload_url"], content=document, headers=target["headers"])
        assert put.status_code == 200
        job = client.post("/v1/jobs", json={"object_key": target["object_key"]})
        assert job.status_code == 202 and job.json()["pages_total"] == 2
        done = wait_for(client, job.json()["id"])[0]
        assert done["status"] == "succeeded"
        assert (
            pymupdf.open(
                stream=client.get(f"/v1/jobs/{done['id']}/result?format=pdf").content
            ).page_count
            == 2
        )


def target_limit(service: Service) -> int:
    return service.stack.settings.max_upload_bytes
