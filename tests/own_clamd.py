"""A real ClamAV daemon (Debian's clamav-daemon) of a test module's own, on a Unix socket and
a loopback TCP port, with a one-signature database written at start: no freshclam, no network,
ready in well under a second.

The signature is our own, for the EICAR test string: clamd ships no signatures (freshclam
downloads them), and a body signature (.ndb: name, target 0 = any file, offset * = anywhere,
the bytes in hex) matches the string wherever it lies, even appended to a valid PDF. clamd
reports it as ``Uocr-Test.EICAR.UNOFFICIAL`` (its suffix for a database it did not sign).
The EICAR string is assembled here, never stored whole in a file, as scanners flag such files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.processes import free_port, wait_until
from uocr_core.clamd import ClamdAddress, ClamdClient

SIGNATURE = "Uocr-Test.EICAR"
REPORTED_SIGNATURE = f"{SIGNATURE}.UNOFFICIAL"
STREAM_MAX_BYTES = 1024 * 1024  # small, so a test can cross it with a 3 MiB upload limit


def eicar() -> bytes:
    """The EICAR anti-virus test string (harmless by design), joined at run time."""
    head = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$"
    return (head + "EICAR-STANDARD-ANTIVIRUS-" + "TEST-FILE!$H+H*").encode()


def clamd_binary() -> str:
    found = shutil.which("clamd") or ("/usr/sbin/clamd" if Path("/usr/sbin/clamd").exists() else "")
    if not found:
        message = "clamd is not installed (apt-get install clamav-daemon; .ci/setup does)"
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@dataclass
class OwnClamd:
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="uocr-clamd-")))
    tcp_port: int = field(default_factory=free_port)
    popen: subprocess.Popen[bytes] | None = None

    @property
    def unix_address(self) -> str:
        return f"unix:{self.root / 'clamd.sock'}"

    @property
    def tcp_address(self) -> str:
        return f"tcp://127.0.0.1:{self.tcp_port}"

    def start(self) -> OwnClamd:
        database = self.root / "db"
        database.mkdir()
        (database / "uocr-test.ndb").write_text(f"{SIGNATURE}:0:*:{eicar().hex()}\n")
        config = self.root / "clamd.conf"
        config.write_text(
            f"LocalSocket {self.root / 'clamd.sock'}\n"
            f"TCPSocket {self.tcp_port}\nTCPAddr 127.0.0.1\n"
            f"DatabaseDirectory {database}\nForeground yes\n"
            f"StreamMaxLength {STREAM_MAX_BYTES // 1024}K\n"
        )
        log = (self.root / "clamd.log").open("ab")
        argv = [clamd_binary(), "-c", str(config)]
        self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        client = ClamdClient(ClamdAddress.parse(self.unix_address), timeout_seconds=2)
        wait_until(lambda: self._answers(client), 30, interval=0.05, what="clamd's PONG")
        return self

    def _answers(self, client: ClamdClient) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            log = (self.root / "clamd.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"clamd exited with {self.popen.returncode}:\n{log}")
        return client.ping()

    def stop(self) -> None:
        if self.popen and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
