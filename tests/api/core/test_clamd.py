"""The INSTREAM client against a real clamd: verdicts, chunking, clamd's size limit, and the
errors an operator sees when clamd is not there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import free_port
from tests.factories import sample_pages, scanned_pdf
from tests.own_clamd import REPORTED_SIGNATURE, STREAM_MAX_BYTES, OwnClamd, eicar
from uocr_core.clamd import CHUNK_BYTES, ClamdAddress, ClamdClient, ClamdError, ClamdStreamTooLarge
from uocr_core.settings import Settings, UploadScanSettings

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def clamd() -> Iterator[OwnClamd]:
    daemon = OwnClamd().start()
    yield daemon
    daemon.stop()


def _client(address: str) -> ClamdClient:
    return ClamdClient(ClamdAddress.parse(address), timeout_seconds=5)


@pytest.mark.parametrize("over", ["unix", "tcp"])
def test_eicar_is_found_and_a_scanned_pdf_is_clean(clamd: OwnClamd, over: str) -> None:
    client = _client(clamd.unix_address if over == "unix" else clamd.tcp_address)
    pdf = scanned_pdf(sample_pages(1, lines=2))
    assert client.scan(eicar()).signature == REPORTED_SIGNATURE
    assert client.scan(pdf).signature is None
    # Appended after %%EOF a PDF reader never sees it; the scan does.
    assert client.scan(pdf + eicar()).infected


def test_the_signature_is_found_across_chunk_boundaries(clamd: OwnClamd) -> None:
    """The string straddles the first 64 KiB chunk: clamd must see one stream, not pieces."""
    data = b"\0" * (CHUNK_BYTES - 20) + eicar() + b"\0" * CHUNK_BYTES
    verdict = _client(clamd.unix_address).scan(data)
    assert verdict.signature == REPORTED_SIGNATURE


def test_a_stream_over_clamds_limit_is_refused_not_passed(clamd: OwnClamd) -> None:
    with pytest.raises(ClamdStreamTooLarge, match="size limit exceeded"):
        _client(clamd.unix_address).scan(b"\0" * (STREAM_MAX_BYTES + CHUNK_BYTES))


def test_no_daemon_is_an_error_naming_the_cause(tmp_path: Path) -> None:
    with pytest.raises(ClamdError, match="No such file"):
        _client(f"unix:{tmp_path / 'absent.sock'}").scan(b"data")
    with pytest.raises(ClamdError, match="refused"):
        _client(f"tcp://127.0.0.1:{free_port()}").scan(b"data")
    assert not _client(f"unix:{tmp_path / 'absent.sock'}").ping()


@pytest.mark.parametrize("address", ["clamd.sock", "unix:", "tcp://host", "tcp://host:99999"])
def test_a_malformed_address_stops_start_up_naming_the_forms(address: str) -> None:
    with pytest.raises(ValueError, match="unix:/path/to/clamd.socket or tcp://host:port"):
        Settings(upload_scan=UploadScanSettings(clamd_address=address))


def test_the_scan_is_off_by_default_and_an_empty_address_is_off() -> None:
    assert Settings().upload_scan.clamd_address is None
    assert UploadScanSettings(clamd_address="").clamd_address is None
