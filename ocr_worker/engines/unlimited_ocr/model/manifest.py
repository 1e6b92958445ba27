"""Weights are checked against their hashes before loading: a partial or corrupt download is
refused with the name of the file (``uocr model manifest|verify PATH``). Torch-free."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST_NAME = "uocr-manifest.json"
# Weights, configs and tokenizer files; everything a load reads.
PATTERNS = ("*.safetensors", "*.bin", "*.json", "*.model", "*.txt", "*.py")


class ManifestError(RuntimeError):
    pass


def sha256_file(path: Path, chunk: int = 8 * 1024 * 1024) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def model_files(root: Path) -> list[Path]:
    files = {p for pattern in PATTERNS for p in root.glob(pattern) if p.is_file()}
    return sorted(p for p in files if p.name != MANIFEST_NAME)


def write_manifest(root: Path) -> Path:
    files = model_files(root)
    if not any(p.suffix in (".safetensors", ".bin") for p in files):
        raise ManifestError(f"{root}: no weight files (*.safetensors) to record")
    entries = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files}
    target = root / MANIFEST_NAME
    target.write_text(json.dumps({"files": entries}, indent=1, sort_keys=True))
    return target


def verify_manifest(root: Path) -> int:
    """Check every recorded file; returns how many. Raises naming the first bad file."""
    manifest = root / MANIFEST_NAME
    if not manifest.is_file():
        raise ManifestError(f"{root}: no {MANIFEST_NAME}; run `uocr model manifest {root}` first")
    entries = json.loads(manifest.read_text())["files"]
    for name, expected in sorted(entries.items()):
        path = root / name
        if not path.is_file():
            raise ManifestError(f"{name}: missing (partial download?)")
        size = path.stat().st_size
        if size != expected["bytes"]:
            raise ManifestError(f"{name}: {size} bytes, expected {expected['bytes']} (truncated?)")
        if sha256_file(path) != expected["sha256"]:
            raise ManifestError(f"{name}: sha256 mismatch (corrupt download)")
    return len(entries)


def check_pinned_manifest(root: Path, expected_sha256: str) -> int:
    """The weights are those a model version names: its manifest has the sha256 the settings
    pin (``manifest_sha256``), and every file matches the manifest. Returns the files checked."""
    manifest = root / MANIFEST_NAME
    if not manifest.is_file():
        raise ManifestError(f"{root}: no {MANIFEST_NAME}; run `uocr model manifest {root}` first")
    actual = sha256_file(manifest)
    if actual != expected_sha256.strip().lower():
        raise ManifestError(
            f"{manifest} has sha256 {actual}, but the version pins {expected_sha256} "
            "(other weights than the version names)"
        )
    return verify_manifest(root)
