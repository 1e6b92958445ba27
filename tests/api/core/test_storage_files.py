"""Objects moved to and from files, on the real S3 server of the test stack and in a folder
store: a large object in parts, byte for byte, its media type kept; a missing one named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uocr_core.storage import LocalObjectStore, ObjectNotFound, ObjectStore, S3ObjectStore


def _stores(stack, tmp_path: Path) -> list[ObjectStore]:  # type: ignore[no-untyped-def]
    return [S3ObjectStore(stack.settings.s3), LocalObjectStore(tmp_path / "local")]


def test_a_file_goes_up_and_comes_back_byte_for_byte(stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(20 * 2**20)  # over boto3's 8 MB part size: uploaded in parts
    source = tmp_path / "big.pdf"
    source.write_bytes(data)
    for n, store in enumerate(_stores(stack, tmp_path)):
        store.put_file(f"files/big-{n}.pdf", source, "application/pdf")
        back = tmp_path / f"back-{n}.pdf"
        store.get_file(f"files/big-{n}.pdf", back)
        assert back.read_bytes() == data
        assert store.get(f"files/big-{n}.pdf") == data
    s3 = S3ObjectStore(stack.settings.s3)
    head = s3.client.head_object(Bucket=s3.bucket, Key="files/big-0.pdf")
    assert head["ContentType"] == "application/pdf"


def test_a_missing_object_is_named_and_writes_no_file(stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for n, store in enumerate(_stores(stack, tmp_path)):
        target = tmp_path / f"never-{n}"
        with pytest.raises(ObjectNotFound, match="files/never"):
            store.get_file("files/never", target)
        assert not target.exists()
