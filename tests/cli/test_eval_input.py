"""``uocr eval`` refuses what it cannot use at once, in one line, with exit status 2 (before any
OCR of the set)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli.conftest import uocr

VERSIONS = {
    "UOCR_MODELS__SERVE": "stable",
    "UOCR_MODELS__VERSIONS": json.dumps({"stable": {}, "candidate": {}}),
}


def _one_document_set(root: Path, content: bytes) -> Path:
    (root / "scan.pdf").write_bytes(content)
    (root / "scan.jsonl").write_text('{"page": 1, "text": "hello"}\n', encoding="utf-8")
    (root / "dataset.toml").write_text(
        '[[documents]]\nid = "scan"\nfile = "scan.pdf"\npages = 1\nground_truth = "scan.jsonl"\n',
        encoding="utf-8",
    )
    return root


def _refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done
    assert done.stderr == f"error: {message}\n"
    assert done.stdout == ""


def test_a_missing_dataset_is_named(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    done = uocr("eval", str(nowhere), "--versions", "stable", "candidate", env=VERSIONS)
    _refused(done, f"dataset {nowhere} does not exist")


def test_an_unknown_version_is_named_with_the_versions_there_are(tmp_path: Path) -> None:
    dataset = _one_document_set(tmp_path, b"%PDF-1.7")
    done = uocr("eval", str(dataset), "--versions", "stable", "nightly", env=VERSIONS)
    _refused(done, "unknown model version 'nightly'; versions are ['candidate', 'stable']")


def test_a_document_that_is_no_pdf_is_named(tmp_path: Path) -> None:
    dataset = _one_document_set(tmp_path, b"plain text, not a PDF")
    done = uocr("eval", str(dataset), "--versions", "stable", "stable", env=VERSIONS)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: document 'scan' ({tmp_path / 'scan.pdf'}): ")
    assert done.stderr.count("\n") == 1


def test_a_negative_margin_is_refused(tmp_path: Path) -> None:
    dataset = _one_document_set(tmp_path, b"%PDF-1.7")
    done = uocr("eval", str(dataset), "--versions", "stable", "stable", "--margin-cer", "-1")
    assert done.returncode == 2 and "--margin-cer" in done.stderr
