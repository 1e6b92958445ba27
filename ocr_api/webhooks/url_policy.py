"""Refuse webhook URLs that point into private networks (SSRF), at submit and again at send."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from ocr_api.core.errors import InvalidRequest


def check_webhook_url(url: str, *, allowed_private_hosts: tuple[str, ...] = ()) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"webhook_url must be an absolute http(s) URL, got {url!r}")
    if parts.username or parts.password:
        raise InvalidRequest("webhook_url must not carry credentials")
    host = parts.hostname
    if host in allowed_private_hosts:
        return
    for address in _resolve(host):
        if not address.is_global or address.is_multicast:
            raise InvalidRequest(
                f"webhook_url host {host!r} resolves to {address}, a private or reserved "
                "address; webhooks are only sent to public hosts"
            )


def _resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        raise InvalidRequest(f"webhook_url host {host!r} cannot be resolved") from None
    return [ipaddress.ip_address(info[4][0]) for info in infos]
