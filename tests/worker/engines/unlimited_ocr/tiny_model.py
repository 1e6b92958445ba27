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


WORDS = ["Multi", "page", "parsing", ".", "document", "<|det|>", "<|/det|>", "text", "[", "]", ","]


def write_tiny_tokenizer(path: Path) -> None:
    """A word-level tokenizer over the tiny vocabulary, with the real special-token ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "[UNK]"]
    vocab = {token: i for i, token in enumerate(specials)}
    vocab["<PAGE>"] = len(vocab)
    for word in WORDS:
        vocab[word] = len(vocab)
    while len(vocab) < TINY_TEXT["vocab_size"]:
        vocab[f"w{len(vocab)}"] = len(vocab)
    vocab[next(k for k, v in vocab.items() if v == IMAGE_TOKEN)] = -1
    vocab = {k: v for k, v in vocab.items() if v >= 0} | {"<image>": IMAGE_TOKEN}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in specials])
    tokenizer.add_tokens([AddedToken("<PAGE>", special=False)])
    tokenizer.save(str(path / "tokenizer.json"))


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
    with torch.no_grad():  # embeddings at std 1 give realistic MoE load (ENGINE_NOTES)
        model.model.language_model.embed_tokens.weight.normal_(0, 1.0)
        for layer in model.model.language_model.layers:
            if hasattr(layer.mlp, "gate"):
                layer.mlp.gate.weight.normal_(0, 0.2)
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
