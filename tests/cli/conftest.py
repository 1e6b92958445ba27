"""Running the real ``uocr`` command in a subprocess, as an operator does."""

from __future__ import annotations

import os
import subprocess
import sys

UOCR_ARGV = [sys.executable, "-m", "uocr_cli"]
# Closed ports on loopback: connecting is refused at once.
UNREACHABLE = {
    "UOCR_DATABASE__URL": "postgresql+psycopg://uocr:s3cret-pw@127.0.0.1:1/uocr",
    "UOCR_REDIS__URL": "redis://:s3cret-pw@127.0.0.1:2/0",
    "UOCR_S3__ENDPOINT_URL": "http://127.0.0.1:3",
}


def uocr(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``uocr ARGS`` with the deployment's UOCR_* variables replaced by ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("UOCR_", "FLOWER_"))}
    return subprocess.run(
        [*UOCR_ARGV, *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
