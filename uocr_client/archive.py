"""Submitting a folder of scans as one batch, safe to run again after a crash or a Ctrl-C.

Every file's idempotency key is derived from its bytes and the options, and the batch's from
its name: a second run finds the batch, skips the files it already holds, uploads the rest
straight to object storage (presigned PUT) and adds each as soon as it is uploaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocr_api.batches.schemas import BatchPublic
from uocr_client.client import UocrClient
from uocr_client.keys import content_key, file_digest

DOCUMENT_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff")


@dataclass(frozen=True)
class Document:
    path: Path
    name: str  # relative to what was given: the name results are written under
    idempotency_key: str


@dataclass(frozen=True)
class Submitted:
    batch: BatchPublic
    uploaded: int
    skipped: int  # already in the batch from an earlier run


def collect(paths: Iterable[Path], *, recursive: bool) -> list[tuple[Path, str]]:
    """(file, name) for each document under ``paths``, in a stable order."""
    found: list[tuple[Path, str]] = []
    for given in paths:
        if given.is_dir():
            pattern = "**/*" if recursive else "*"
            for path in sorted(given.glob(pattern)):
                if path.is_file() and path.suffix.lower() in DOCUMENT_SUFFIXES:
                    found.append((path, path.relative_to(given).as_posix()))
        elif given.is_file():
            found.append((given, given.name))
        else:
            raise FileNotFoundError(f"{given}: no such file or folder")
    return found


def batch_key(name: str) -> str:
    return "uocr-batch-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def submit_archive(
    client: UocrClient,
    files: list[tuple[Path, str]],
    *,
    batch_name: str,
    options: dict[str, Any],
    parallel: int = 4,
    on_file: Callable[[str], None] | None = None,
    batch_options: dict[str, Any] | None = None,
) -> Submitted:
    """Upload and add every file not yet in the batch named ``batch_name``, then close it.
    ``options`` apply to each document (and make its key); ``batch_options`` (the batch's
    webhook) to the batch."""
    documents = [
        Document(path, name, content_key(file_digest(path), options)) for path, name in files
    ]
    batch = client.create_batch(
        idempotency_key=batch_key(batch_name),
        name=batch_name,
        open=True,
        **options,
        **(batch_options or {}),
    )
    if batch.status != "open":  # an earlier run added everything and closed it
        return Submitted(batch, 0, len(documents))
    known = {job.idempotency_key for job in client.batch_jobs(batch.id)}
    todo = [d for d in documents if d.idempotency_key not in known]

    def send(document: Document) -> None:
        key = client.upload(document.path)
        client.add_documents(
            batch.id,
            [
                {
                    "object_key": key,
                    "idempotency_key": document.idempotency_key,
                    "source_name": document.name,
                }
            ],
        )
        if on_file:
            on_file(document.name)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for _ in pool.map(send, todo):
            pass
    return Submitted(client.close_batch(batch.id), len(todo), len(documents) - len(todo))


RESULT_SUFFIXES = {
    "json": ".json",
    "markdown": ".md",
    "text": ".txt",
    "hocr": ".hocr",
    "pdf": ".pdf",
}


def output_path(out_dir: Path, source: str, fmt: str) -> Path:
    """``box-1/scan.pdf`` -> ``OUT/box-1/scan.md``: results under the input's own name (a name
    that would climb out of OUT is flattened)."""
    parts = [part for part in Path(source).parts if part not in ("", ".", "..", "/")]
    relative = Path(*parts) if parts else Path("document")
    if fmt == "pdf":
        relative = relative.with_name(relative.stem + ".ocr")
    return out_dir / relative.with_suffix(RESULT_SUFFIXES[fmt])


def fetch_batch(
    client: UocrClient, batch_id: str, out_dir: Path, formats: tuple[str, ...]
) -> tuple[int, list[dict[str, Any]]]:
    """Write each finished document's results under OUT; returns how many files were written
    and the manifest entries of documents without a result."""
    written, missing = 0, []
    for entry in client.batch_manifest(batch_id):
        if not entry["results"]:
            missing.append(entry)
            continue
        for fmt in formats:
            target = output_path(out_dir, entry["source"], fmt)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(client.result(entry["job_id"], fmt))
            written += 1
    return written, missing
