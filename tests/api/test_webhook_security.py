from __future__ import annotations

import time

import pytest

from ocr_api.core.errors import InvalidRequest
from ocr_api.webhooks.signing import sign, verify
from ocr_api.webhooks.url_policy import check_webhook_url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://10.0.0.8/hook",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://localhost/hook",
        "http://0.0.0.0/",
        "ftp://example.org/x",
        "http://user:pw@8.8.8.8/",
    ],
)
def test_private_and_malformed_webhook_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidRequest):
        check_webhook_url(url)


def test_public_addresses_and_allowed_hosts_pass() -> None:
    check_webhook_url("https://8.8.8.8/hook")
    check_webhook_url("http://127.0.0.1:9/hook", allowed_private_hosts=("127.0.0.1",))


def test_signatures_verify_only_with_the_right_secret_body_and_time() -> None:
    body, now = b'{"id":"e1"}', int(time.time())
    header = sign("whsec_a", body, now)
    assert verify("whsec_a", body, header)
    assert not verify("whsec_b", body, header)
    assert not verify("whsec_a", body + b" ", header)
    assert not verify("whsec_a", body, sign("whsec_a", body, now - 3600))  # a replay
    assert not verify("whsec_a", body, "garbage")
