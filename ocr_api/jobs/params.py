"""Path parameters shared by the job and batch routes."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path

from uocr_core.errors import NotFound

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _existing_id(kind: str, value: str) -> str:
    """Ids are UUIDs; anything else (a NUL byte, a path) names nothing that exists."""
    if not UUID.fullmatch(value):
        raise NotFound(f"{kind} {value[:80]!r} not found")
    return value


def job_id_param(job_id: Annotated[str, Path(description="the id a submit answered with")]) -> str:
    return _existing_id("job", job_id)


def batch_id_param(
    batch_id: Annotated[str, Path(description="the id a create answered with")],
) -> str:
    return _existing_id("batch", batch_id)


JobIdDep = Annotated[str, Depends(job_id_param)]
BatchIdDep = Annotated[str, Depends(batch_id_param)]
