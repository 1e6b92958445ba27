"""Submitting a folder of scans as one batch, safe to run again after a crash or a Ctrl-C.

Every file's idempotency key is derived from its bytes and the options, and the batch's from
its name: a second run finds the batch, skips the files it already holds, uploads the rest
straight to object storage (presigned PUT) and adds each as soon as it is uploaded.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uocr_client.client import UocrClient
from uocr_client.keys import content_key, file_digest
from uocr_core.schemas.batches import BatchPublic

DOCUMENT_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff")


@dataclass(frozen=True)
class Document:
    path: Path
    name: str  # relative to what was given: the name results are written under
    idempotency_key: str
    # The key uocr gave the file before keys carried the batch and the name (its bytes and
    # options only): a batch begun by an older client is resumed, not sent again.
    earlier_key: str = ""


@dataclass(frozen=True)
class Submitted:
    batch: BatchPublic
    uploaded: int
    skipped: int  # already in the batch from an earlier run


def collect(paths: Iterable[Path], *, recursive: bool) -> list[tuple[Path, str]]:
    """(file, name) for each document under ``paths``, in a stable order. A name is the file's
    path in the folder given; with several paths, under the folder's own name (``box-1/a.pdf``),
    so that two boxes' ``a.pdf`` stay two documents. Two files that would still share a name
    are refused: their results would overwrite each other."""
    given = list(paths)
    found: list[tuple[Path, str]] = []
    for root in given:
        if root.is_dir():
            prefix = f"{root.resolve().name}/" if len(given) > 1 else ""
            pattern = "**/*" if recursive else "*"
            for path in sorted(root.glob(pattern)):
                if path.is_file() and path.suffix.lower() in DOCUMENT_SUFFIXES:
                    found.append((path, prefix + path.relative_to(root).as_posix()))
        elif root.is_file():
            found.append((root, root.name))
        else:
            raise FileNotFoundError(f"{root}: no such file or folder")
    first: dict[str, Path] = {}
    for path, name in found:
        if name in first and first[name].resolve() != path.resolve():
            raise ValueError(f"{first[name]} and {path} would both be stored as {name}")
        first.setdefault(name, path)
    return [(path, name) for name, path in first.items()]  # a file given twice counts once


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
    # A document's key is its bytes, its options, the batch and its name: run again, the batch
    # skips what it holds; two files with the same bytes (a box's duplicate separator sheets,
    # a scan already sent in another batch) are each a document of this batch with a result.
    documents = []
    for path, name in files:
        digest = file_digest(path)
        placed = content_key(digest, _placed(options, batch_name, name))
        documents.append(Document(path, name, placed, content_key(digest, options)))
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
    todo = [d for d in documents if not {d.idempotency_key, d.earlier_key} & known]

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


def _placed(options: dict[str, Any], batch_name: str, name: str) -> dict[str, Any]:
    return {**options, "batch": batch_name, "source": name}


RESULT_SUFFIXES = {
    "json": ".json",
    "markdown": ".md",
    "text": ".txt",
    "hocr": ".hocr",
    "alto": ".alto.xml",
    "chunks": ".chunks.jsonl",
    "pdf": ".pdf",
}


def output_path(out_dir: Path, source: str, fmt: str, *, keep_suffix: bool = False) -> Path:
    """``box-1/scan.pdf`` -> ``OUT/box-1/scan.md``: results under the input's own name (a name
    that would climb out of OUT is flattened). ``keep_suffix``: ``OUT/box-1/scan.pdf.md``, for
    inputs that differ only in their suffix (``scan.pdf``, ``scan.tif``)."""
    parts = [part for part in Path(source).parts if part not in ("", ".", "..", "/")]
    relative = Path(*parts) if parts else Path("document")
    stem = relative.name if keep_suffix else relative.stem
    if fmt == "pdf":
        stem += ".ocr"
    return out_dir / relative.with_name(stem + RESULT_SUFFIXES[fmt])


def output_paths(out_dir: Path, sources: list[str], fmt: str) -> dict[str, Path]:
    """Each source's result file; sources that would share one keep their own suffix."""
    plain = {source: output_path(out_dir, source, fmt) for source in sources}
    shared = Counter(plain.values())
    return {
        source: output_path(out_dir, source, fmt, keep_suffix=True) if shared[path] > 1 else path
        for source, path in plain.items()
    }


def fetch_batch(
    client: UocrClient, batch_id: str, out_dir: Path, formats: tuple[str, ...]
) -> tuple[int, list[dict[str, Any]]]:
    """Write each finished document's results under OUT; returns how many files were written
    and the manifest entries of documents without a result."""
    manifest = client.batch_manifest(batch_id)
    done = [entry for entry in manifest if entry["results"]]
    written = 0
    for fmt in formats:
        targets = output_paths(out_dir, [entry["source"] for entry in done], fmt)
        for entry in done:
            target = targets[entry["source"]]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(client.result(entry["job_id"], fmt))
            written += 1
    return written, [entry for entry in manifest if not entry["results"]]
