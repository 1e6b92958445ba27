"""A tiny random-init Unlimited-OCR of the real architecture, saved as an official checkpoint
(official key names, ``model_type: "unlimited-ocr"``, ``language_config``) for CPU tests."""

from __future__ import annotations

import json
from pathlib import Path

import torch

TINY_VISION = {
    "sam_config": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "mlp_dim": 64,
        "output_channels": 16,
        "global_attn_indexes": [1],
        "window_size": 4,
        "image_size": 128,
        "patch_size": 16,
        "downsample_channels": [32, 64],
    },
    "encoder_config": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
    },
}
TINY_TEXT = {
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 8,
    "n_shared_experts": 2,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
}
WINDOW = 8  # the ring wraps after 8 generated tokens
IMAGE_TOKEN = 1000


SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]  # ids 0, 1, 2
LAYOUT_TOKENS = ["<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>", "<|grounding|>"]  # after <image>
# Text shaped like the real model's output (det blocks, tables, prose, Chinese) to learn merges
# from. "<PAGE>" is deliberately absent: as in the real vocabulary, it is ordinary text spelled
# by several tokens, and the model may spell it with any of them.
CORPUS = [
    "document parsing. Multi page parsing.",
    "title [100, 50, 899, 90] Annual Report 2024",
    "text [100, 120, 899, 300] Revenue grew in every quarter of the year.",
    "table [100, 320, 899, 600] <table><tr><td>Q1</td><td>10</td></tr></table>",
    "image [382, 87, 489, 174] header [53, 23, 365, 41] page_number [480, 960, 520, 980]",
    "figure/chart [12, 34, 56, 78] Advanced Template and Styles of the document",
    "The package manager installs, upgrades and removes software on the system.",
    "年度报告 收入在每个季度都有增长。 Debian 系统 软件包 管理",
]


def write_tiny_tokenizer(path: Path) -> None:
    """A byte-level BPE over the tiny vocabulary, with the real special-token layout: BOS 0,
    EOS 1, PAD 2, ``<image>`` at IMAGE_TOKEN followed by the layout tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=IMAGE_TOKEN,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    # Unused ordinary tokens up to <image>, as the real vocabulary has thousands of tokens.
    fillers = [f"\u2591{i}\u2591" for i in range(IMAGE_TOKEN - tokenizer.get_vocab_size())]
    tokenizer.add_tokens(fillers)
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in ["<image>", *LAYOUT_TOKENS]])
    assert tokenizer.token_to_id("<image>") == IMAGE_TOKEN
    tokenizer.save(str(path / "tokenizer.json"))


def _make_vision_live(model, generator=None) -> None:  # type: ignore[no-untyped-def]
    """transformers initialises SAM's weights at ~1e-10, so every page would give the same
    features and no test could see a bug in the image path. Fan-in scaled weights make
    different pages give clearly different features (checked in test_vision_path).
    ``generator``: drawn from it, else from torch's global generator (as seeded by the caller)."""
    for name, param in model.model.vision_tower.sam_encoder.named_parameters():
        if param.dim() >= 2:
            fan_in = param[0].numel() if param.dim() > 2 or "rel_pos" not in name else 1
            param.normal_(0, 0.02 if "pos" in name else fan_in**-0.5, generator=generator)
    projector = model.model.multi_modal_projector.weight
    # image rows as large as word embeddings
    projector.normal_(0, 2 * projector.shape[1] ** -0.5, generator=generator)


def _make_decoder_live(model) -> None:  # type: ignore[no-untyped-def]
    """At transformers' std-0.02 init the decoder is prefix-blind: its residual stream is the
    last token's embedding (std 1), so greedy output is the same for any page and either prompt.
    Fan-in scaled attention, MLP and head weights make every page and prompt give its own
    tokens (test_transformers_parity checks it); the routers keep their near-uniform init."""
    for name, param in model.named_parameters():
        decoder = "language_model.layers" in name or name.startswith("lm_head")
        if decoder and param.dim() >= 2 and "mlp.gate." not in name:
            param.normal_(0, param.shape[-1] ** -0.5)  # (..., out, in): fan-in


def write_tiny_checkpoint(path: Path, *, seed: int = 0) -> Path:
    from transformers.models.unlimited_ocr import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
    )

    config = UnlimitedOcrConfig(
        vision_config=TINY_VISION,
        text_config={**TINY_TEXT, "sliding_window": WINDOW},
        image_token_id=IMAGE_TOKEN,
    )
    torch.manual_seed(seed)
    model = UnlimitedOcrForConditionalGeneration(config)
    # embeddings at std 1 give realistic MoE load (docs/model.md, "Full size with random weights")
    with torch.no_grad():
        model.model.language_model.embed_tokens.weight.normal_(0, 1.0)
        for layer in model.model.language_model.layers:
            if hasattr(layer.mlp, "gate"):
                layer.mlp.gate.weight.normal_(0, 0.2)
        _make_vision_live(model)
        _make_decoder_live(model)
    model.save_pretrained(path)  # official key naming (the loader's renames, reversed)
    official = {
        "model_type": "unlimited-ocr",
        "architectures": ["UnlimitedOCRForCausalLM"],
        "vision_config": TINY_VISION,
        "language_config": TINY_TEXT,
        "sliding_window": WINDOW,
        "image_token_id": IMAGE_TOKEN,
    }
    (path / "config.json").write_text(json.dumps(official, indent=1))
    write_tiny_tokenizer(path)
    return path
