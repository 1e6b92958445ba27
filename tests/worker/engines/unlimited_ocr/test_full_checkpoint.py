"""The full-size random checkpoint the GPU benchmarks load must look like the real one to the
real loader: the official config.json shape and the real tokenizer's size and special ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer
from transformers.models.unlimited_ocr import UnlimitedOcrConfig

from bench.engine.full_checkpoint import official_config, write_tokenizer
from ocr_worker.engines.unlimited_ocr.model.checkpoint import read_config


def test_the_official_config_reads_back_as_the_v1_architecture(tmp_path: Path) -> None:
    v1: Any = UnlimitedOcrConfig()
    (tmp_path / "config.json").write_text(json.dumps(official_config(v1)))
    loaded = read_config(tmp_path)
    assert loaded.text_config.to_dict() == v1.text_config.to_dict()
    assert loaded.image_token_id == 128815 and loaded.text_config.vocab_size == 129280


def test_the_tokenizer_has_the_real_size_and_special_ids(tmp_path: Path) -> None:
    write_tokenizer(tmp_path, 129280, 128815)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.get_vocab_size(with_added_tokens=True) == 129280
    ids = [tokenizer.token_to_id(t) for t in ("<image>", "<|ref|>", "<|grounding|>")]
    assert ids == [128815, 128816, 128820]
    assert tokenizer.encode("<image>Multi page parsing.").ids[0] == 128815
    # Every id decodes to text, as the real vocabulary's do: random weights pick any of them.
    assert tokenizer.decode([129279, 5000], skip_special_tokens=False) == "w129279w5000"
    assert tokenizer.decode(tokenizer.encode("<PAGE>", add_special_tokens=False).ids) == "<PAGE>"
