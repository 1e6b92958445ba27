from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UOCR = str(Path(sys.executable).with_name("uocr"))


def _uocr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([UOCR, *args], capture_output=True, text=True, timeout=60)


def test_manifest_then_verify_refuses_corrupt_and_partial_files(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"w" * 4096)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text('{"v": 1}')
    assert _uocr("model", "manifest", str(tmp_path)).returncode == 0
    assert "3 files verified" in _uocr("model", "verify", str(tmp_path)).stdout

    (tmp_path / "tokenizer.json").write_text('{"v": 2}')
    corrupt = _uocr("model", "verify", str(tmp_path))
    assert corrupt.returncode == 1 and "tokenizer.json: sha256 mismatch" in corrupt.stderr

    (tmp_path / "tokenizer.json").write_text('{"v": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"w" * 100)
    partial = _uocr("model", "verify", str(tmp_path))
    assert "model.safetensors: 100 bytes, expected 4096" in partial.stderr


def test_verify_without_a_manifest_says_how_to_make_one(tmp_path: Path) -> None:
    result = _uocr("model", "verify", str(tmp_path))
    assert result.returncode == 1 and "uocr model manifest" in result.stderr
