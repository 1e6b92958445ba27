"""A full-size Unlimited-OCR v1 checkpoint with random bf16 weights, for the GPU benchmarks.

Real weights cannot be downloaded here, so this writes what the real loader and `uocr model
verify` read: the v1 architecture (transformers' defaults are the official v1 config) saved in
the official key naming (the native class's save_pretrained reverses its loader's renames), a
``config.json`` shaped like the official one (``model_type: "unlimited-ocr"``,
``language_config``), a byte-level BPE tokenizer of the real vocabulary size (129,280) with the
real special ids (BOS 0, EOS 1, PAD 2, ``<image>`` 128815, then the layout tokens), and a
manifest. Random weights never stop by themselves: the worker's per-page token budget
(``unlimited_ocr.max_tokens_per_page``) closes each page and the page guard forces its marker.

    python -m bench.engine.full_checkpoint /tmp/uocr-v1-random      # on the GPU machine (~1 min)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from bench import harness
from ocr_worker.engines.unlimited_ocr.model.manifest import write_manifest
from tests.worker.engines.unlimited_ocr.tiny_model import CORPUS, LAYOUT_TOKENS, SPECIALS

OFFICIAL_TEXT_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "n_routed_experts",
    "n_shared_experts", "num_experts_per_tok", "bos_token_id", "eos_token_id",
)  # fmt: skip


def write_tokenizer(path: Path, vocab_size: int, image_token: int) -> None:
    """Merges learnt from OCR-shaped text; the rest of the ids up to the real vocabulary size
    are plain vocabulary entries (decodable, as the real model's output is), not thousands of
    added tokens, so the tokenizer loads in milliseconds like the real one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    spec = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    layout = {image_token + i: t for i, t in enumerate(["<image>", *LAYOUT_TOKENS])}
    for token_id in range(len(vocab), vocab_size):  # ASCII: byte-level decodes it as written
        vocab[layout.get(token_id, f"w{token_id}")] = token_id
    spec["added_tokens"] += [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, t in layout.items()
    ]  # fmt: skip
    (path / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    loaded = Tokenizer.from_file(str(path / "tokenizer.json"))
    assert loaded.get_vocab_size(with_added_tokens=True) == vocab_size
    assert loaded.token_to_id("<image>") == image_token


def official_config(config: Any) -> dict[str, Any]:
    """``config.json`` as the official repository writes it (hyphenated model type, the text
    config under ``language_config``, ``first_k_dense_replace`` instead of layer types)."""
    text = config.text_config
    return {
        "model_type": "unlimited-ocr",
        "architectures": ["UnlimitedOCRForCausalLM"],
        "language_config": {
            **{field: getattr(text, field) for field in OFFICIAL_TEXT_FIELDS},
            "first_k_dense_replace": text.mlp_layer_types.index("sparse"),
        },
        "sliding_window": text.sliding_window,
        "image_token_id": config.image_token_id,
        "torch_dtype": "bfloat16",
    }


def randomize(model: Any, generator: torch.Generator) -> None:
    """Random weights with a realistic load: unit norms, embeddings at std 1 (as trained
    ones are), near-uniform routers so every expert is used, the rest at std 0.02."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight") and param.dim() == 1:
                param.fill_(1.0)
            elif name.endswith("mlp.gate.weight"):  # near-uniform router: balanced experts
                param.normal_(0, 0.002, generator=generator)
            elif "embed_tokens" in name:
                param.normal_(0, 1.0, generator=generator)
            else:
                param.normal_(0, 0.02, generator=generator)


def write_full_checkpoint(path: Path, *, seed: int = 0) -> Path:
    from transformers.models.unlimited_ocr import (
        UnlimitedOcrConfig,
        UnlimitedOcrForConditionalGeneration,
    )

    path.mkdir(parents=True, exist_ok=True)
    config = UnlimitedOcrConfig()  # transformers' defaults are the official v1
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with torch.device(device):  # built on the card: seconds, not minutes
        model = UnlimitedOcrForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    randomize(model, torch.Generator(device=device).manual_seed(seed))
    model.save_pretrained(path)
    (path / "config.json").write_text(json.dumps(official_config(config), indent=1))
    text: Any = config.text_config
    write_tokenizer(path, text.vocab_size, config.image_token_id)
    write_manifest(path)
    return path


def main() -> None:
    parser = harness.parser(__doc__, results=False)
    parser.add_argument("path", type=Path)
    with harness.Stopwatch() as watch:
        path = write_full_checkpoint(parser.parse_args().path)
    size = sum(f.stat().st_size for f in path.iterdir()) / 1e9
    print(f"wrote {path}: {size:.2f} GB in {watch.seconds:.0f} s")


if __name__ == "__main__":
    main()
