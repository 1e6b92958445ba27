"""Chunks at the size a caller asks for, on the real stack: a real scanned document read by
the real worker, its chunks fetched again in characters and in the tokens of a tokenizer the
deployment names; each within its size, covering the same Markdown; and wrong asks refused,
naming why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tokenizers import Tokenizer

from ocr_api.main import create_app
from tests.e2e.conftest import ReadScan, Service
from tests.factories import bpe_tokenizer


def test_chunks_come_at_the_size_asked_in_characters_or_a_named_tokenizers_tokens(
    service: Service, real_scan_read: ReadScan, tmp_path: Path
) -> None:
    tenant, job_id = real_scan_read.tenant, real_scan_read.job_id
    texts = real_scan_read.scanned.text_layers
    tokenizer = bpe_tokenizer(tmp_path / "tokenizer.json", texts * 10, vocab_size=2000)
    settings = service.stack.settings.model_copy(
        update={"chunk_tokenizers": {"archive-bpe": tokenizer}}
    )
    auth = {"Authorization": f"Bearer {tenant.api_key}"}
    url = f"/v1/jobs/{job_id}/result"

    def chunks(**params: str | int) -> list[dict[str, Any]]:
        answer = api.get(url, params={"format": "chunks", **params}, headers=auth)
        assert answer.status_code == 200, answer.text
        return [json.loads(line) for line in answer.text.splitlines()]

    with TestClient(create_app(settings)) as api:
        markdown = api.get(url, params={"format": "markdown"}, headers=auth).text
        written = chunks()  # as assembly wrote them: 1,500 characters
        by_tokens = chunks(max_tokens=96, tokenizer="archive-bpe")
        by_chars = chunks(max_chars=400)
        counted = Tokenizer.from_file(str(tokenizer))
        sizes = [len(counted.encode(c["text"], add_special_tokens=False).ids) for c in by_tokens]
        assert max(sizes) <= 96 and len(by_tokens) > len(written), sizes
        # a text chunk within the size (a table or code block is kept whole, however long)
        assert max(len(c["text"]) for c in by_chars if "```" not in c["text"]) <= 400
        assert len(by_chars) > len(written)

        def covered(cut: list[dict[str, Any]]) -> str:
            """The Markdown the chunks' spans cover, its white space aside."""
            return "".join("".join(markdown[a:b] for c in cut for a, b in c["spans"]).split())

        for cut in (by_tokens, by_chars):  # the same Markdown, every page, in order
            assert covered(cut) == covered(written)
            assert sorted({p for c in cut for p in c["pages"]}) == [1, 2, 3]

        refusals: list[tuple[dict[str, str | int], str]] = [
            ({"max_tokens": 64, "tokenizer": "gpt-4"}, "no tokenizer named 'gpt-4'"),
            ({"max_tokens": 64}, "max_tokens and tokenizer go together"),
            ({"max_chars": 500, "max_tokens": 64, "tokenizer": "archive-bpe"}, "not both"),
            ({"max_chars": 500, "format": "markdown"}, "size chunks, not markdown"),
            ({"max_chars": 5}, "max_chars"),
        ]
        for params, says in refusals:
            refused = api.get(url, params={"format": "chunks", **params}, headers=auth)
            assert refused.status_code == 422, (params, refused.text)
            assert says in refused.text, refused.text
