from __future__ import annotations

import http.server
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from uocr_core.errors import InvalidRequest
from uocr_core.settings import WebhookSettings
from uocr_core.webhooks import sender
from uocr_core.webhooks.signing import sign, verify
from uocr_core.webhooks.url_policy import check_webhook_url


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


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::a00:1]/hook",  # NAT64 to 10.0.0.1
        "http://[64:ff9b:1::a9fe:a9fe]/hook",  # local-use NAT64 to 169.254.169.254
        "http://[2002:a00:1::1]/hook",  # 6to4 from 10.0.0.1
        "http://[::ffff:192.168.1.1]/hook",  # IPv4-mapped
    ],
)
def test_ipv6_addresses_leading_to_private_ipv4_ones_are_refused(url: str) -> None:
    with pytest.raises(InvalidRequest, match="private or reserved"):
        check_webhook_url(url)
    check_webhook_url("http://[64:ff9b::808:808]/hook")  # NAT64 to a public address passes


class _Receiver(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.hits.append(self.headers.get("Host", ""))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def test_dns_that_answers_public_to_the_check_and_private_to_the_connect_reaches_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DNS rebinding: the hostile tenant's name resolves to a public address when the sender
    checks it and to an internal service's a moment later. The sender connects to the address
    it checked; the internal service (a real server on loopback here) never hears of it."""
    internal = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    port = internal.server_address[1]
    answers = iter(["8.8.8.8"] + ["127.0.0.1"] * 10)
    real = socket.getaddrinfo

    def rebinding(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.rebind.example":
            address = next(answers)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    settings = WebhookSettings(timeout_seconds=1)
    try:
        with httpx.Client() as client:
            status, error, _ = sender._post(
                client, settings, f"http://hooks.rebind.example:{port}/h", b"{}", "s", "d", 1
            )
    finally:
        internal.shutdown()
    assert status is None and error is not None  # 8.8.8.8 is unreachable from the test box
    assert _Receiver.hits == []


def test_the_pinned_request_names_the_host_it_was_sent_for() -> None:
    internal = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=internal.serve_forever, daemon=True).start()
    port = internal.server_address[1]
    settings = WebhookSettings(allowed_private_hosts=("127.0.0.1",))
    try:
        with httpx.Client() as client:
            url = f"http://127.0.0.1:{port}/h"
            status, _, _ = sender._post(client, settings, url, b"{}", "s", "d", 1)
    finally:
        internal.shutdown()
    assert status == 204 and _Receiver.hits[-1] == f"127.0.0.1:{port}"


def test_behind_an_egress_proxy_the_url_goes_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy connects (and TLS is checked against the name end to end): pinning an address
    there would make every https webhook fail its certificate check."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "hooks.partner.example")
    assert sender._through_proxy("https://hooks.example.org/h")
    assert not sender._through_proxy("https://hooks.partner.example/h")
    assert not sender._through_proxy("http://hooks.example.org/h")  # no HTTP_PROXY set
