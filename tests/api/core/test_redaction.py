"""What a worker's start-up row keeps of its settings: everything but credentials."""

from __future__ import annotations

import json

from uocr_core.redaction import REDACTED, redacted_settings, url_without_password
from uocr_core.settings import load_settings


def test_secrets_and_url_passwords_never_reach_the_record() -> None:
    settings = load_settings(
        database={"url": "postgresql+psycopg://uocr:db-pass-1@db.internal:5432/uocr"},
        redis={"url": "redis://:redis-pass-2@cache.internal:6379/0"},
        s3={"access_key_id": "AKIA-ID-3", "secret_access_key": "s3-secret-4"},
        page_group_size=7,
    )
    kept = redacted_settings(settings)
    written = json.dumps(kept)
    for secret in ("db-pass-1", "redis-pass-2", "AKIA-ID-3", "s3-secret-4"):
        assert secret not in written
    assert kept["database"]["url"] == "postgresql+psycopg://uocr:***@db.internal:5432/uocr"
    assert kept["redis"]["url"] == "redis://:***@cache.internal:6379/0"
    assert kept["s3"]["secret_access_key"] == kept["s3"]["access_key_id"] == REDACTED
    assert kept["page_group_size"] == 7  # the rest as it is: what the worker really ran with


def test_text_that_only_looks_like_a_url_is_left_alone() -> None:
    assert url_without_password("http://user@host/x") == "http://user@host/x"
    assert url_without_password("a@b") == "a@b"
    assert url_without_password("http://[bad@host") == "http://[bad@host"
