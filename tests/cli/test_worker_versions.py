"""`uocr worker --model-version`: a worker serves one version, named where operators look, and
refuses to start on an unknown version or on weights other than the ones the version pins."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ocr_worker.engines.unlimited_ocr.model.manifest import (
    MANIFEST_NAME,
    sha256_file,
    write_manifest,
)
from ocr_worker.launcher import worker_specs
from tests.cli.conftest import UNREACHABLE, uocr


def _weights(root: Path) -> str:
    """A model folder with a manifest; returns the manifest's sha256 (what a version pins)."""
    root.mkdir()
    (root / "model.safetensors").write_bytes(b"weights v2")
    (root / "config.json").write_text("{}")
    write_manifest(root)
    return sha256_file(root / MANIFEST_NAME)


def _versions_env(v2: Mapping[str, object]) -> dict[str, str]:
    versions = {"v1": {"engine": "rapidocr"}, "v2": v2}
    return {
        **UNREACHABLE,
        "UOCR_MODELS__VERSIONS": json.dumps(versions),
        "UOCR_MODELS__SERVE": "v1",
    }


def test_an_unknown_version_is_refused_in_one_line() -> None:
    done = uocr("worker", "--model-version", "v3", env=_versions_env({}))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: --model-version: unknown model version 'v3'; versions are ['v1', 'v2']"
    )


def test_weights_other_than_the_pinned_manifest_are_refused(tmp_path: Path) -> None:
    pinned = _weights(tmp_path / "v2")
    (tmp_path / "v2" / "model.safetensors").write_bytes(b"weights v2, retrained")
    v2 = {"engine": "rapidocr", "model_path": str(tmp_path / "v2"), "manifest_sha256": pinned}
    done = uocr("worker", "--model-version", "v2", env=_versions_env(v2))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: model version 'v2': model.safetensors: ")
    assert "(truncated?)" in line or "sha256 mismatch" in line


def test_another_manifest_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    _weights(tmp_path / "v2")
    v2 = {"model_path": str(tmp_path / "v2"), "manifest_sha256": "0" * 64}
    done = uocr("worker", "--model-version", "v2", env=_versions_env(v2))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert f"but the version pins {'0' * 64}" in line


def test_matching_weights_pass_the_check_and_the_worker_goes_on_to_the_broker(
    tmp_path: Path,
) -> None:
    v2 = {"model_path": str(tmp_path / "v2"), "manifest_sha256": _weights(tmp_path / "v2")}
    done = uocr("worker", "--model-version", "v2", env=_versions_env(v2))
    assert done.returncode == 1  # past the weights: the next check is the (unreachable) broker
    assert "model version" not in done.stderr and "redis" in done.stderr.lower()


def test_a_versions_workers_take_its_queues_and_say_its_name() -> None:
    (cpu,) = worker_specs([], concurrency=2, host="h", model_version="v2")
    argv = " ".join(cpu.argv)
    assert cpu.node_name == "cpu-v2@h" and "-n cpu-v2@h" in argv
    assert "-Q ocr.interactive.v2,ocr.long.v2,ocr.backlog.v2" in argv
    assert cpu.env == {"UOCR_WORKER__MODEL_VERSION": "v2"}
    (gpu,) = worker_specs([0], concurrency=1, host="h", queues=("ocr.long",), model_version="v2")
    assert gpu.node_name == "gpu0-v2@h" and "-Q ocr.long.v2" in " ".join(gpu.argv)
    assert gpu.env["UOCR_WORKER__MODEL_VERSION"] == "v2"
    (default,) = worker_specs([], concurrency=1, host="h", model_version="default")
    assert default.node_name == "cpu@h"
    assert "-Q ocr.interactive,ocr.long,ocr.backlog" in " ".join(default.argv)
