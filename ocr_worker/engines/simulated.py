"""The simulated engine, for capacity tests only: no model, a configured time a page group
(waited, not spent on a core), and deterministic text and blocks of a configured length.

It lets a few cores stand in for many GPU workers, so that a test or a bench measures the
control plane (API, database, broker, object store, the workers' bookkeeping), not OCR.
Its defaults are the GPU engine's measured rates (docs/scaling.md). Never the default engine,
and refused in production (``uocr_core.settings``)."""

from __future__ import annotations

import hashlib
import threading
import time

from ocr_worker.engines.base import OcrEngine, PageGroupInput, PageImage
from uocr_core.contracts import Block, PageResult
from uocr_core.settings import SimulatedEngineSettings

# Words the text is drawn from: real English and Chinese, so that searches, chunkers and byte
# counts see text of a real shape (about five characters and a space a word).
WORDS = (  # noqa: SIM905 - a line of text reads better than a column of strings
    "the archive contract page report section table total clause party shall agreement "
    "payment notice article volume record index annual summary schedule 合同 报告 章节 "
    "附件 条款 total amount date signed witness registry folio ledger account balance"
).split()


class SimulatedEngine(OcrEngine):
    name = "simulated"

    def __init__(self, settings: SimulatedEngineSettings) -> None:
        self.settings = settings
        # One card: groups given at once (a threads pool) take their turns on it, so a worker
        # does a card's pages a second however many threads feed it.
        self._card = threading.Lock()
        self._busy_until = 0.0

    def input_long_side(self, pages: int) -> int | None:
        return self.settings.render_long_side

    def group_seconds(self, pages: int) -> float:
        """The time a group of ``pages`` takes: the group's own, then a page's vision and its
        tokens' decode at the card's rate."""
        s = self.settings
        per_page = s.seconds_per_page + s.tokens_per_page / s.tokens_per_second
        return s.seconds_per_group + pages * per_page

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        started = time.perf_counter()
        results = [self._page(group.job_id, page) for page in group.pages]
        with self._card:
            self._busy_until = max(self._busy_until, started) + self.group_seconds(len(results))
            done_at = self._busy_until
        time.sleep(max(0.0, done_at - time.perf_counter()))
        self.count_tokens(self.settings.tokens_per_page * len(group.pages))
        duration_ms = int(_since(started) * 1000 / max(1, len(group.pages)))
        return [r.model_copy(update={"duration_ms": duration_ms}) for r in results]

    def _page(self, job_id: str, page: PageImage) -> PageResult:
        """The same page of the same job reads the same every time (a retried group too)."""
        s = self.settings
        width, height = page.report_size
        chars = int(s.tokens_per_page * s.chars_per_token)
        per_block = max(1, chars // s.blocks_per_page)
        seed = f"{job_id}:{page.page_no}"
        margin, pitch = width * 0.08, (height * 0.84) / s.blocks_per_page
        blocks = []
        for n in range(s.blocks_per_page):
            top = height * 0.08 + n * pitch
            blocks.append(
                Block(
                    label="title" if n == 0 else "text",
                    bbox=(margin, top, width - margin, top + pitch * 0.8),
                    text=_text(f"{seed}:{n}", 48 if n == 0 else per_block),
                )
            )
        markdown = "\n\n".join(f"# {b.text}" if b.label == "title" else b.text for b in blocks)
        return PageResult(
            page=page.page_no,
            status="succeeded",
            text="\n".join(b.text for b in blocks),
            markdown=markdown,
            blocks=blocks,
            width=width,
            height=height,
            engine=self.name,
            confidence=_confidence(seed),
        )


def _confidence(seed: str) -> float:
    """The same for the same page: 0.90-1.00 mostly, as clean print reads, and one page in 32
    at 0.60-0.80, under the review threshold, as a smudged or faint one does."""
    digest = hashlib.blake2b(f"{seed}:confidence".encode(), digest_size=2).digest()
    share = int.from_bytes(digest) / 0xFFFF
    low = digest[0] % 32 == 0
    return round(0.6 + 0.2 * share if low else 0.9 + 0.1 * share, 4)


def _text(seed: str, length: int) -> str:
    """About ``length`` characters of words chosen by ``seed``'s hash, the same every time."""
    words: list[str] = []
    size, counter = 0, 0
    while size < length:
        digest = hashlib.blake2b(f"{seed}:{counter}".encode(), digest_size=32).digest()
        for byte in digest:
            word = WORDS[byte % len(WORDS)]
            words.append(word)
            size += len(word) + 1
            if size >= length:
                break
        counter += 1
    return " ".join(words)


def _since(started: float) -> float:
    return time.perf_counter() - started
