"""Client-side helpers for the end-to-end tests."""

from __future__ import annotations

import time
from typing import Any, Protocol

import httpx

TERMINAL = ("succeeded", "failed", "canceled")


def submit(
    client: httpx.Client,
    data: bytes,
    name: str = "doc.pdf",
    headers: dict[str, str] | None = None,
    **form: str,
) -> httpx.Response:
    return client.post("/v1/jobs", files={"file": (name, data)}, data=form, headers=headers or {})


class JobsClient(Protocol):  # an httpx client on the API, or FastAPI's TestClient
    def get(self, url: str) -> Any: ...  # httpx (or httpx2) Response


def wait_for(
    client: JobsClient, job_id: str, *, timeout: float = 180, until: tuple[str, ...] = TERMINAL
) -> tuple[dict[str, Any], list[int]]:
    """Poll until the job's status is in ``until``; also returns every pages_done value seen."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").raise_for_status().json()
        if not seen or seen[-1] != job["pages_done"]:
            seen.append(job["pages_done"])
        if job["status"] in until:
            return job, seen
        time.sleep(0.15)
    raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s: {job}")
