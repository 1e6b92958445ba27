"""A client of ClamAV's daemon (clamd): PING and INSTREAM, nothing else.

INSTREAM sends the bytes themselves, so clamd needs no access to our files or bucket: the
command ``zINSTREAM\\0``, then chunks each led by its length (4 bytes, big-endian), then a
zero-length chunk; clamd answers ``stream: OK`` or ``stream: <signature> FOUND`` (the ``z``
form ends every message with a NUL). One connection per scan: clamd serves each connection
with its own thread, and a connection left idle is closed by clamd after its IdleTimeout.
Framework-free: the API and the feeder (a worker) both scan.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

CHUNK_BYTES = 64 * 1024  # well under clamd's StreamMaxLength; large chunks gain nothing
_MAX_REPLY_BYTES = 4096


class ClamdError(Exception):
    """clamd could not give a verdict: unreachable, timed out, or an answer we cannot read."""


class ClamdStreamTooLarge(ClamdError):
    """The document is larger than clamd's StreamMaxLength: clamd refused to scan it."""


@dataclass(frozen=True)
class ClamdAddress:
    """Where clamd listens: ``unix:/run/clamav/clamd.ctl`` or ``tcp://host:3310``."""

    text: str
    unix_path: str | None = None  # a Unix socket, or else host and port
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, text: str) -> ClamdAddress:
        if text.startswith("unix:") and len(text) > len("unix:"):
            return cls(text, unix_path=text[len("unix:") :])
        if text.startswith("tcp://"):
            host, _, port = text[len("tcp://") :].rstrip("/").rpartition(":")
            if host and port.isdigit() and 0 < int(port) < 65536:
                return cls(text, host=host.strip("[]"), port=int(port))
        raise ValueError(
            f"{text!r} is not a clamd address; use unix:/path/to/clamd.socket or tcp://host:port"
        )


@dataclass(frozen=True)
class ScanVerdict:
    signature: str | None  # the signature clamd matched; None when the bytes are clean

    @property
    def infected(self) -> bool:
        return self.signature is not None


class ClamdClient:
    def __init__(self, address: ClamdAddress, timeout_seconds: float) -> None:
        self.address = address
        self.timeout_seconds = timeout_seconds  # for the connect and for each send and receive

    def ping(self) -> bool:
        try:
            with self._connect() as conn:
                conn.sendall(b"zPING\0")
                return _read_reply(conn) == "PONG"
        except OSError:
            return False

    def scan(self, data: bytes) -> ScanVerdict:
        try:
            with self._connect() as conn:
                conn.sendall(b"zINSTREAM\0")
                _send_chunks(conn, data)
                reply = _read_reply(conn)
        except OSError as error:
            raise ClamdError(f"{error.strerror or error}") from None
        return _verdict(reply)

    def _connect(self) -> socket.socket:
        address = self.address
        if address.unix_path is None:  # create_connection tries each address the host has
            return socket.create_connection((address.host, address.port), self.timeout_seconds)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(self.timeout_seconds)
        try:
            conn.connect(address.unix_path)
        except OSError:
            conn.close()
            raise
        return conn


def _send_chunks(conn: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    try:
        for start in range(0, len(view), CHUNK_BYTES):
            chunk = view[start : start + CHUNK_BYTES]
            conn.sendall(struct.pack(">I", len(chunk)))
            conn.sendall(chunk)
        conn.sendall(struct.pack(">I", 0))
    except (BrokenPipeError, ConnectionResetError):
        # clamd stops reading past StreamMaxLength and closes: its reply says why.
        pass


def _read_reply(conn: socket.socket) -> str:
    reply = b""
    while not reply.endswith(b"\0") and len(reply) < _MAX_REPLY_BYTES:
        try:
            part = conn.recv(_MAX_REPLY_BYTES)
        except ConnectionResetError:
            part = b""
        if not part:
            break
        reply += part
    return reply.rstrip(b"\0").decode("utf-8", "replace").strip()


def _verdict(reply: str) -> ScanVerdict:
    if reply == "stream: OK":
        return ScanVerdict(None)
    if reply.startswith("stream: ") and reply.endswith(" FOUND"):
        return ScanVerdict(reply[len("stream: ") : -len(" FOUND")])
    if "size limit exceeded" in reply:
        raise ClamdStreamTooLarge(reply)
    raise ClamdError(f"unexpected answer {reply[:200]!r}" if reply else "no answer")
