"""Path and query parameters shared by the job routes."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path

from ocr_api.core.errors import NotFound

JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def job_id_param(job_id: Annotated[str, Path(description="the id a submit answered with")]) -> str:
    """Job ids are UUIDs; anything else (a NUL byte, a path) is a job that does not exist."""
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"job {job_id[:80]!r} not found")
    return job_id


JobIdDep = Annotated[str, Depends(job_id_param)]
