"""Where each object lives in the bucket. Fixed keys make every write idempotent."""

from __future__ import annotations

import re
import uuid

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def job_prefix(job_id: str) -> str:
    """Every object of a job (its input, page results, progress, document results) is under it."""
    return f"jobs/{job_id}/"


def input_key(job_id: str, index: int, extension: str) -> str:
    return f"jobs/{job_id}/input/{index:03d}.{extension}"


def page_result_key(job_id: str, page_no: int) -> str:
    return f"jobs/{job_id}/pages/{page_no:05d}.json"


def progress_key(job_id: str) -> str:
    return f"jobs/{job_id}/progress.json"


# A finished document's results by format: the file name (in the bucket and in `uocr run`'s
# output folder) and the media type it is stored and served with.
RESULT_FILES: dict[str, tuple[str, str]] = {
    "json": ("result.json", "application/json; charset=utf-8"),
    "markdown": ("result.md", "text/markdown; charset=utf-8"),
    "text": ("result.txt", "text/plain; charset=utf-8"),
    "jsonl": ("pages.jsonl", "application/x-ndjson; charset=utf-8"),
    "hocr": ("result.hocr", "text/html; charset=utf-8"),
    "alto": ("result.alto.xml", "application/xml; charset=utf-8"),
    # JSON lines too, but not pages.jsonl's: a type of its own, so Accept can ask for either.
    "chunks": ("chunks.jsonl", "application/vnd.uocr.chunks+jsonl; charset=utf-8"),
    "pdf": ("result.pdf", "application/pdf"),
}


def result_file_name(fmt: str) -> str:
    return RESULT_FILES[fmt][0]


def result_media_type(fmt: str) -> str:
    return RESULT_FILES[fmt][1]


def result_key(job_id: str, fmt: str) -> str:
    return f"jobs/{job_id}/{result_file_name(fmt)}"


def inbox_prefix(tenant_id: str) -> str:
    """Objects a tenant uploads itself and then names in a JSON submit must live here."""
    return f"inbox/{tenant_id}/"


def upload_key(tenant_id: str, filename: str) -> str:
    """A fresh key in the tenant's inbox that keeps the file's name (made safe): where a
    presigned PUT, or a batch's file sent through the API, lands."""
    name = _UNSAFE_NAME.sub("_", filename.rsplit("/", 1)[-1]).strip("._") or "document"
    return f"{inbox_prefix(tenant_id)}uploads/{uuid.uuid4().hex}/{name}"
