"""Loading Unlimited-OCR offline from ``model_path`` with transformers' native classes.

The official config.json says ``model_type: "unlimited-ocr"`` (a hyphen, unknown to the Auto
classes) and keeps the text config under ``language_config``: we build ``UnlimitedOcrConfig``
ourselves and hand it to the native loader, which renames the official keys and fuses experts.

Only v1 is served. Unlimited-OCR 2.0 (a learned per-layer block router, page-restricted block
selection, two-axis page positions) has no reference code that can be read here, and
transformers ships v1 only: a v2 checkpoint is refused by name rather than run by a guessed
decoding rule (docs/model.md, "Which model").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

# What marks a 2.0 checkpoint: its name, or the block router its config and weights carry.
_V2_NAME = re.compile(r"unlimited[-_ ]?ocr[-_ ]?v?2", re.IGNORECASE)
_V2_CONFIG_KEY = re.compile(
    r"sr_swa|block_router|attn_router|attention_router|router_(dim|heads|rope)|page_gate"
)
_V2_TENSOR = re.compile(r"(^|\.)(router|block_router|summary_query)(\.|$)")


class UnsupportedCheckpoint(RuntimeError):
    """A checkpoint of a model version this engine does not serve."""


def _v2_refusal(model_path: Path, evidence: str) -> UnsupportedCheckpoint:
    return UnsupportedCheckpoint(
        f"{model_path} is an Unlimited-OCR 2.0 checkpoint ({evidence}). uocr serves "
        "Unlimited-OCR v1 (baidu/Unlimited-OCR, R-SWA decoding, token for token as "
        "transformers' generate); 2.0's reference code cannot be read, so its weights are "
        "refused rather than decoded by a guessed rule. Point model_path at the v1 weights "
        '(docs/model.md, "Which model").'
    )


def _v2_in_config(raw: dict[str, Any]) -> str | None:
    names = [str(raw.get("model_type", "")), *map(str, raw.get("architectures") or [])]
    if any(_V2_NAME.search(name) for name in names):
        return f"config.json names {', '.join(n for n in names if n)}"
    for section in (raw, raw.get("language_config") or {}, raw.get("text_config") or {}):
        for key in section:
            if _V2_CONFIG_KEY.search(key):
                return f"config.json has {key!r}"
    return None


def _v2_in_tensors(names: Iterable[str]) -> str | None:
    router = sorted(name for name in names if _V2_TENSOR.search(name))
    return f"attention-router tensors such as {router[0]!r}" if router else None


def read_config(model_path: Path) -> Any:
    from transformers.models.unlimited_ocr import UnlimitedOcrConfig

    raw = json.loads((model_path / "config.json").read_text())
    if evidence := _v2_in_config(raw):
        raise _v2_refusal(model_path, evidence)
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
    if evidence := _v2_in_tensors(info.get("unexpected_keys") or []):
        raise _v2_refusal(model_path, evidence)
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"} | (
        {"error_msgs": info["error_msgs"]} if info.get("error_msgs") else {}
    )
    if problems:
        raise RuntimeError(f"checkpoint at {model_path} does not match the model: {problems}")
    return model.to(device).eval()
