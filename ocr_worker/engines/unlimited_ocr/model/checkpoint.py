"""Loading Unlimited-OCR offline from ``model_path`` with transformers' native classes.

The official config.json says ``model_type: "unlimited-ocr"`` (a hyphen, unknown to the Auto
classes) and keeps the text config under ``language_config``: we build ``UnlimitedOcrConfig``
ourselves and hand it to the native loader, which renames the official keys and fuses experts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch


def read_config(model_path: Path) -> Any:
    from transformers.models.unlimited_ocr import UnlimitedOcrConfig

    raw = json.loads((model_path / "config.json").read_text())
    for key in (
        "model_type",
        "architectures",
        "auto_map",
        "transformers_version",
        "torch_dtype",
        "dtype",
    ):
        raw.pop(key, None)
    return UnlimitedOcrConfig(**raw)


def load_model(model_path: Path, *, device: torch.device, dtype: torch.dtype) -> Any:
    """The native model with the checkpoint's weights; refuses missing or unexpected tensors."""
    from transformers.models.unlimited_ocr import UnlimitedOcrForConditionalGeneration

    loaded: Any = UnlimitedOcrForConditionalGeneration.from_pretrained(
        str(model_path),
        config=read_config(model_path),
        local_files_only=True,
        dtype=dtype,
        output_loading_info=True,
    )
    model, info = loaded
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"} | (
        {"error_msgs": info["error_msgs"]} if info.get("error_msgs") else {}
    )
    if problems:
        raise RuntimeError(f"checkpoint at {model_path} does not match the model: {problems}")
    return model.to(device).eval()
