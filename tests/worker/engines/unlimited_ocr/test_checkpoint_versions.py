"""Only Unlimited-OCR v1 is served: a 2.0 checkpoint (named so in its config, or carrying the
block router's settings or tensors) is refused at load by name, saying what is served, never
with a generic "unexpected tensor"; a v1 checkpoint loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ocr_worker.engines.unlimited_ocr.model.checkpoint import (
    UnsupportedCheckpoint,
    load_model,
    read_config,
)
from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint

V2_MESSAGE = r"Unlimited-OCR 2\.0 checkpoint .* uocr serves Unlimited-OCR v1"


@pytest.fixture(scope="module")
def v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("v1"))


def _copy(v1: Path, into: Path) -> Path:
    for file in v1.iterdir():
        (into / file.name).write_bytes(file.read_bytes())
    return into


def _edit_config(path: Path, **changes: object) -> None:
    config = json.loads((path / "config.json").read_text())
    for key, value in changes.items():
        if key == "language_config":
            config[key] = {**config[key], **value}  # type: ignore[dict-item]
        else:
            config[key] = value
    (path / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("changes", "evidence"),
    [
        ({"model_type": "unlimited-ocr-2"}, "names unlimited-ocr-2"),
        ({"architectures": ["UnlimitedOCR2ForCausalLM"]}, "names .*UnlimitedOCR2ForCausalLM"),
        ({"language_config": {"sr_swa": {"max_blocks": 12}}}, "has 'sr_swa'"),
        ({"language_config": {"router_dim": 128}}, "has 'router_dim'"),
    ],
)
def test_a_v2_config_is_refused_naming_v2_and_what_is_served(
    v1: Path, tmp_path: Path, changes: dict[str, object], evidence: str
) -> None:
    path = _copy(v1, tmp_path)
    _edit_config(path, **changes)
    with pytest.raises(UnsupportedCheckpoint, match=V2_MESSAGE) as refused:
        read_config(path)
    assert refused.match(evidence)


def test_v2_router_tensors_are_refused_by_name_not_as_unexpected_tensors(
    v1: Path, tmp_path: Path
) -> None:
    path = _copy(v1, tmp_path)
    tensors = load_file(str(path / "model.safetensors"))
    for layer in (0, 1):
        tensors[f"model.layers.{layer}.self_attn.router.q_proj.weight"] = torch.zeros(8, 8)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(UnsupportedCheckpoint, match=V2_MESSAGE) as refused:
        load_model(path, device=torch.device("cpu"), dtype=torch.float32)
    assert refused.match("attention-router tensors such as '.*layers.0.self_attn.router")


def test_a_v1_checkpoint_loads(v1: Path) -> None:
    model = load_model(v1, device=torch.device("cpu"), dtype=torch.float32)
    assert model.config.text_config.num_hidden_layers >= 1
