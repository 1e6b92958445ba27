"""Absolute URLs clients are given (Location, status_url, result_url, webhooks): they start
with ``public_base_url``, where clients reach the API, whatever proxy the request came in by."""

from __future__ import annotations

from uocr_core.settings import Settings


def job_url(settings: Settings, job_id: str, suffix: str = "") -> str:
    return f"{settings.public_base_url.rstrip('/')}/v1/jobs/{job_id}{suffix}"
