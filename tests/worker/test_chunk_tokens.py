"""Chunks sized in a real tokenizer's tokens (uocr_core/results/measure.py): a BPE tokenizer
trained here with the ``tokenizers`` library and saved as the tokenizer.json a deployment
names. Every chunk of text stays within the token limit (counted on the chunk's own text,
joins included), cut at sentence ends, and the chunks still cover the Markdown once."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.factories import bpe_tokenizer
from tests.worker.test_chunks import LONG, _assert_cover, _page, _written
from uocr_core.errors import InvalidRequest, ServiceUnavailable
from uocr_core.results import measure
from uocr_core.results.chunks import write_chunks

CORPUS = [LONG, "Feed the sheets face down.", "The contract runs for five years."] * 20


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BPE tokenizer of 300 tokens: "archive" is one token, "Sentence 17" three."""
    return bpe_tokenizer(tmp_path_factory.mktemp("tokenizer") / "tokenizer.json", CORPUS)


def _chunks(pages: list[Any], size: measure.Measure) -> list[dict[str, Any]]:
    out = io.StringIO()
    write_chunks(pages, out, size)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_chunks_stay_within_the_tokens_asked_for_and_cover_the_markdown(
    tmp_path: Path, tokenizer_file: Path
) -> None:
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    pages = [
        _page(1, [("title", "Scanning"), ("text", LONG)]),
        _page(2, [("text", "Feed the sheets face down."), ("text", LONG)]),
    ]
    markdown, by_chars = _written(tmp_path, pages)  # as assembly writes them: 1,500 characters
    chunks = _chunks(pages, measure.Tokens(64, tokenizer_file))
    _assert_cover(markdown, chunks)
    counts = [len(tokenizer.encode(c["text"], add_special_tokens=False).ids) for c in chunks]
    assert max(counts) <= 64 and min(counts) > 16, counts  # full chunks, not crumbs
    assert len(chunks) > len(by_chars)
    # Cut at sentence ends, each chunk under its heading, boxes still on their pages.
    assert all(c["text"].rstrip().endswith(".") for c in chunks if c["text"] != "# Scanning")
    assert all(c["headings"] == ["Scanning"] for c in chunks)
    assert all({b["page"] for b in c["boxes"]} <= set(c["pages"]) for c in chunks)


def test_chunks_sized_in_characters_as_asked(tmp_path: Path) -> None:
    pages = [_page(1, [("text", LONG)]), _page(2, [("text", LONG)])]
    markdown, _ = _written(tmp_path, pages)
    chunks = _chunks(pages, measure.Chars(300))
    _assert_cover(markdown, chunks)
    assert all(200 < len(c["text"]) <= 300 for c in chunks[:-1])


def test_a_tokenizer_is_named_from_the_deployments_list(tokenizer_file: Path) -> None:
    known = {"archive-bpe": tokenizer_file}
    assert measure.tokens(128, "archive-bpe", known).size("the archive") == 2
    with pytest.raises(InvalidRequest, match="no tokenizer named 'gpt'.*archive-bpe"):
        measure.tokens(128, "gpt", known)
    with pytest.raises(ServiceUnavailable, match="cannot be read"):
        measure.tokens(128, "gone", {"gone": tokenizer_file.parent / "missing.json"})
