"""Where each object lives in the bucket. Fixed keys make every write idempotent."""

from __future__ import annotations


def job_prefix(job_id: str) -> str:
    """Every object of a job (its input, page results, progress, document results) is under it."""
    return f"jobs/{job_id}/"


def input_key(job_id: str, index: int, extension: str) -> str:
    return f"jobs/{job_id}/input/{index:03d}.{extension}"


def page_result_key(job_id: str, page_no: int) -> str:
    return f"jobs/{job_id}/pages/{page_no:05d}.json"


def progress_key(job_id: str) -> str:
    return f"jobs/{job_id}/progress.json"


def result_key(job_id: str, fmt: str) -> str:
    names = {
        "json": "result.json",
        "markdown": "result.md",
        "text": "result.txt",
        "jsonl": "pages.jsonl",
        "pdf": "result.pdf",
        "hocr": "result.hocr",
    }
    return f"jobs/{job_id}/{names[fmt]}"


def inbox_prefix(tenant_id: str) -> str:
    """Objects a tenant uploads itself and then names in a JSON submit must live here."""
    return f"inbox/{tenant_id}/"
