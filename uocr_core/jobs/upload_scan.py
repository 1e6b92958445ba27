"""The optional upload scan: a document's bytes go through ClamAV before anything is stored.

Every path by which a document enters calls it where its bytes are first read, and before
they are parsed (PyMuPDF reading a hostile PDF is the exposure the scan exists to narrow):
a multipart submit and a JSON submit of an inbox object (jobs/service.py), a batch's files
sent through the API (batches/router.py), and a batch document, from a presigned upload or
an inbox prefix, when the feeder admits it (jobs/admission_service.py).
"""

from __future__ import annotations

import time

import structlog

from uocr_core.clamd import ClamdAddress, ClamdClient, ClamdError, ClamdStreamTooLarge
from uocr_core.errors import InfectedDocument, PayloadTooLarge, ScannerUnavailable
from uocr_core.settings import UploadScanSettings

log = structlog.get_logger(__name__)


def check_upload(settings: UploadScanSettings, *, name: str, data: bytes) -> None:
    """Returns when the bytes are clean or no scanner is configured; raises InfectedDocument
    (422), PayloadTooLarge (413: beyond clamd's StreamMaxLength) or ScannerUnavailable (503)."""
    if settings.clamd_address is None:
        return
    address = ClamdAddress.parse(settings.clamd_address)
    started = time.monotonic()
    try:
        verdict = ClamdClient(address, settings.timeout_seconds).scan(data)
    except ClamdStreamTooLarge:
        raise PayloadTooLarge(
            f"{name} ({len(data)} bytes) is larger than the upload scanner accepts (clamd's "
            "StreamMaxLength); it was not accepted"
        ) from None
    except ClamdError as error:
        log.error("upload_scan.unavailable", clamd=address.text, error=str(error))
        raise ScannerUnavailable(
            f"the upload scanner (ClamAV clamd at {address.text}) did not answer: {error}; "
            "uploads are refused until it does, and nothing was kept"
        ) from None
    seconds = round(time.monotonic() - started, 3)
    if verdict.signature is not None:
        log.warning("upload_scan.infected", document=name[:200], signature=verdict.signature)
        raise InfectedDocument(
            f"{name}: the upload scan (ClamAV) found {verdict.signature}; the document was "
            "refused and nothing of it was kept",
            signature=verdict.signature,
        )
    log.info("upload_scan.clean", document=name[:200], bytes=len(data), seconds=seconds)
