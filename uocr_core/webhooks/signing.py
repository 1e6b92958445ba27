"""HMAC-SHA256 signatures over ``<timestamp>.<raw body>``, as in Stripe-style webhooks.

Receivers recompute the HMAC with their tenant's secret and refuse stale timestamps (replays).
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "Uocr-Signature"
EVENT_ID_HEADER = "Uocr-Event-Id"
ATTEMPT_HEADER = "Uocr-Attempt"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(secret: str, body: bytes, header: str, *, tolerance_seconds: int = 300) -> bool:
    """True if ``header`` signs ``body`` with ``secret`` and is fresh."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    if abs(time.time() - timestamp) > tolerance_seconds:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
