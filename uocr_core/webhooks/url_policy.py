"""Refuse webhook URLs that point into private networks (SSRF), at submit and again at send.

At send the request goes to the very address that was checked (``vet_webhook_url``), with the
URL's host in the Host header and in TLS (SNI, certificate): a host whose DNS answers a public
address to the check and a private one to the connection (DNS rebinding) reaches nothing
inside. IPv6 addresses that carry an IPv4 one (NAT64, 6to4, Teredo, IPv4-mapped) are judged by
the IPv4 address they lead to.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

from uocr_core.errors import InvalidRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, local-use translation


def check_webhook_url(url: str, *, allowed_private_hosts: tuple[str, ...] = ()) -> None:
    vet_webhook_url(url, allowed_private_hosts=allowed_private_hosts)


def vet_webhook_url(url: str, *, allowed_private_hosts: tuple[str, ...] = ()) -> str:
    """``url`` with the address it was checked at in place of its host (unchanged for an
    allowed private host): where to send it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"webhook_url must be an absolute http(s) URL, got {url!r}")
    if parts.username or parts.password:
        raise InvalidRequest("webhook_url must not carry credentials")
    host = parts.hostname
    if host in allowed_private_hosts:
        return url
    addresses = _resolve(host)
    for address in addresses:
        if not _public(address):
            raise InvalidRequest(
                f"webhook_url host {host!r} resolves to {address}, a private or reserved "
                "address; webhooks are only sent to public hosts"
            )
    pinned = f"[{addresses[0]}]" if addresses[0].version == 6 else str(addresses[0])
    netloc = pinned if parts.port is None else f"{pinned}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _public(address: Address) -> bool:
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        return all(_public(inner) for inner in _embedded(address))
    return True


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses a packet to ``address`` may end up at."""
    inner = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in NAT64 or address in NAT64_LOCAL:
        inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in inner if a is not None]


def _resolve(host: str) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        raise InvalidRequest(f"webhook_url host {host!r} cannot be resolved") from None
    return [ipaddress.ip_address(info[4][0]) for info in infos]
