"""Tiny factories: scanned-looking documents with known text, and the error rate against it.

``python -m tests.factories OUT.pdf`` writes the sample the README's first command OCRs.
"""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pymupdf
from PIL import Image

if TYPE_CHECKING:
    from bench.accuracy.corpus import SourceDocument

WORDS = [
    "archive",
    "contract",
    "report",
    "ledger",
    "invoice",
    "section",
    "clause",
    "payment",
    "delivery",
    "notice",
    "party",
    "schedule",
    "amount",
    "total",
    "balance",
    "account",
    "record",
    "volume",
    "chapter",
    "annex",
    "signature",
    "witness",
    "inspection",
    "warranty",
    "period",
    "term",
    "renewal",
    "storage",
    "transfer",
    "review",
    "approval",
    "summary",
    "budget",
    "quarter",
    "revenue",
    "expense",
    "audit",
    "board",
    "meeting",
    "minutes",
    "resolution",
    "member",
    "council",
    "district",
]


def page_lines(page_no: int, *, lines: int = 8, seed: int = 0) -> list[str]:
    """Known text for one page: a heading naming the page, then sentences of distinct words."""
    rng = random.Random(seed * 1000 + page_no)
    body = []
    for line_no in range(lines):
        words = [rng.choice(WORDS) for _ in range(7)]
        body.append(
            f"{line_no + 1}. " + " ".join(words).capitalize() + f" {rng.randint(10, 9999)}."
        )
    return [f"Page {page_no} of the archive"] + body


def sample_pages(count: int, *, lines: int = 8, seed: int = 0) -> list[list[str]]:
    return [page_lines(n, lines=lines, seed=seed) for n in range(1, count + 1)]


def scanned_pdf(
    pages: list[list[str]], *, seed: int = 0, dpi: int = 150, noise: float = 10.0
) -> bytes:
    """Render each page's lines, rasterise, add scanner noise, and wrap the images in a PDF."""
    rng = np.random.default_rng(seed)
    out = pymupdf.open()
    for lines in pages:
        pixels = _render_lines(lines, dpi)
        noisy = pixels.astype(np.float32) + rng.normal(0, noise, pixels.shape)
        speckle = rng.random(pixels.shape) < 0.002
        noisy[speckle] = 0
        image = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), mode="L")
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=70)
        page = out.new_page(width=595, height=842)
        page.insert_image(page.rect, stream=buffer.getvalue())
    return out.tobytes(garbage=3, deflate=True)


def _render_lines(lines: list[str], dpi: int) -> np.ndarray:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 90), lines[0], fontsize=16, fontname="hebo")
    y = 130.0
    for line in lines[1:]:
        page.insert_text((72, y), line, fontsize=11, fontname="helv")
        y += 20
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)


def normalise(text: str) -> str:
    return " ".join(text.split())


def character_error_rate(expected: str, actual: str) -> float:
    """Levenshtein distance over characters (whitespace collapsed), divided by expected length."""
    a, b = normalise(expected), normalise(actual)
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1] / max(1, len(a))


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "samples/sample.pdf"
    with open(target, "wb") as handle:
        handle.write(scanned_pdf(sample_pages(3), seed=7))
    print(target)


def bpe_tokenizer(path: Path, texts: list[str], vocab_size: int = 300) -> Path:
    """A real BPE tokenizer (words first, then byte-pair merges) trained on ``texts`` and saved
    as the Hugging Face tokenizer.json a deployment names in ``chunk_tokenizers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"])
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))
    return path


def require_fetched(source: SourceDocument) -> None:
    """Skip a test whose real document is not on this machine (a run outside CI); in CI
    (UOCR_REQUIRE_SERVICES) fail it, since .ci/setup fetches the corpus."""
    import os  # only the tests on real documents need these

    import pytest

    if source.pdf_path.is_file():
        return
    message = f"{source.pdf_path} not fetched (bash .ci/setup fetches it)"
    if os.environ.get("UOCR_REQUIRE_SERVICES"):
        pytest.fail(message)
    pytest.skip(message)
