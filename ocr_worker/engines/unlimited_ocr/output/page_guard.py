"""The page guard: every input page gets its own section, in order, and no page loops unseen.

How the real model frames pages (docs/model.md, "Output grammar"): for several pages its
output is ``<PAGE>`` page 1 ``<PAGE>`` page 2 ... EOS: the marker OPENS each page's section, and
text before the first marker is not a page (the official code drops it). One page on its own
(the single-image path) has no markers at all: the whole output is the page.

``<PAGE>`` is ordinary text in v1, spelled by several tokens, and the model may spell it with
any of them; so the guard finds markers in the decoded text (``token_text``), not in ids.

Rules, applied per decode step (torch-free):
- EOS is refused until the last page's section is open; the model wanting it earlier is
  flagged ``model_ended_early`` on the page it was writing;
- a page that reaches its token budget is closed (the marker is forced, or EOS on the last
  page) and flagged ``token_budget_exhausted``; text before the first marker gets a small
  budget of its own, then the first marker is forced (flag ``text_before_first_page``);
- a marker on the last page would open a section for a page that does not exist: decoding
  ends there (EOS forced) and the last page is flagged ``extra_page_sections``;
- no n-gram of ``ngram_size`` may repeat within the last ``window`` ids (prompt included);
  when the model's own choice was such a repeat, the page is flagged ``repetition_loop``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

PAGE_MARKER = "<PAGE>"
BUDGET_FLAG = "token_budget_exhausted"
LOOP_FLAG = "repetition_loop"
EARLY_END_FLAG = "model_ended_early"
EXTRA_SECTIONS_FLAG = "extra_page_sections"
PREAMBLE_FLAG = "text_before_first_page"
PREAMBLE_BUDGET = 16  # the real model opens with the marker; a few stray ids are tolerated


@dataclass
class PageGuard:
    num_pages: int
    eos_id: int
    marker_ids: tuple[int, ...]  # how the guard spells "<PAGE>" when it must force one
    page_budget: int
    token_text: Callable[[int], str]  # the decoded text of one id
    framed: bool = True  # several pages: sections open at markers; one page: no markers
    ngram_size: int = 35
    window: int = 1024
    history: list[int] = field(default_factory=list)  # prompt + generated, for n-grams
    page_index: int = -1  # the section being written; -1 before the first marker
    tokens_in_page: int = 0
    flags: dict[int, set[str]] = field(default_factory=dict)
    finished: bool = False
    observed: int = 0  # ids observed so far (prompt excluded): an index into the output
    section_starts: list[int] = field(default_factory=list)  # output index of page i's first id
    _tail: str = ""  # the last few decoded characters, to find a marker split across ids
    _preamble: str = ""  # what was written before the first marker
    _forced: list[int] = field(default_factory=list)
    # Per page section: the sum of the chosen tokens' log-probabilities, and how many (tokens
    # the guard forced are not the model's reading: left out).
    _logprob_sums: dict[int, float] = field(default_factory=dict)
    _logprob_counts: dict[int, int] = field(default_factory=dict)
    # (n-1)-gram -> counts of the ids that followed it, over the last ``window`` ids only.
    _ngrams: defaultdict[tuple[int, ...], Counter[int]] = field(
        default_factory=lambda: defaultdict(Counter)
    )

    def __post_init__(self) -> None:
        if not self.framed:
            if self.num_pages != 1:
                raise ValueError("unframed output (no <PAGE> markers) holds exactly one page")
            self.page_index = 0

    def seed(self, prompt_ids: list[int]) -> None:
        """The prompt counts for n-grams but opens no page."""
        for token in prompt_ids[-self.window :]:
            self._append(token)

    @property
    def on_last_page(self) -> bool:
        return self.page_index >= self.num_pages - 1

    @property
    def current_page(self) -> int:
        """The page whose image the model is reading now (the first one before any marker)."""
        return max(self.page_index, 0)

    def confidence(self, index: int) -> float | None:
        """Page section ``index``'s confidence: the geometric mean of the probabilities the
        model gave the tokens it wrote there (exp of their mean log-probability), 0 to 1;
        None where it wrote none."""
        count = self._logprob_counts.get(index, 0)
        if not count:
            return None
        return round(math.exp(self._logprob_sums[index] / count), 4)

    def forced_token(self) -> int | None:
        """A token the guard imposes this step (closing a page over budget), or None."""
        if not self._forced and not self.finished:
            budget = PREAMBLE_BUDGET if self.page_index < 0 else self.page_budget
            if self.tokens_in_page >= budget:
                self._flag(PREAMBLE_FLAG if self.page_index < 0 else BUDGET_FLAG)
                self._forced = [self.eos_id] if self.on_last_page else list(self.marker_ids)
        return self._forced[0] if self._forced else None

    def banned(self) -> set[int]:
        """Ids the next token may not be."""
        banned = self._repeat_completions()
        if not self.on_last_page:
            banned.add(self.eos_id)
        return banned

    def observe(
        self, token: int, *, wanted: int | None = None, logprob: float | None = None
    ) -> None:
        """Record the chosen token; ``wanted`` is the model's choice before the bans,
        ``logprob`` the log-probability the model gave ``token``."""
        if self._forced:
            self._forced.pop(0)
        elif logprob is not None and math.isfinite(logprob) and self.page_index >= 0:
            page = self.page_index
            self._logprob_sums[page] = self._logprob_sums.get(page, 0.0) + logprob
            self._logprob_counts[page] = self._logprob_counts.get(page, 0) + 1
        if wanted is not None and wanted != token:
            if wanted == self.eos_id and not self.on_last_page:
                self._flag(EARLY_END_FLAG)
            elif wanted in self._repeat_completions():
                self._flag(LOOP_FLAG)
        self._append(token)
        self.observed += 1
        self.tokens_in_page += 1
        if token == self.eos_id:
            self.finished = True
            return
        if self.framed:
            for _ in range(self._markers_completed_by(token)):
                self._open_next_page()

    def _open_next_page(self) -> None:
        if self.on_last_page:  # a section for a page that does not exist: stop here
            self._flag(EXTRA_SECTIONS_FLAG)
            self._forced = [self.eos_id]
            return
        if self.page_index < 0 and self._preamble.replace(PAGE_MARKER, "").strip():
            self._flag(PREAMBLE_FLAG)  # text before the first marker: not a page, dropped
        self.page_index += 1
        self.tokens_in_page = 0
        self.section_starts.append(self.observed)

    def _markers_completed_by(self, token: int) -> int:
        """Markers whose last character this token wrote: the tail is shorter than a marker,
        so every marker found ends in this token's text."""
        piece = self.token_text(token)
        if self.page_index < 0:
            self._preamble += piece
        text = self._tail + piece
        self._tail = text[-(len(PAGE_MARKER) - 1) :]
        return text.count(PAGE_MARKER)

    def _repeat_completions(self) -> set[int]:
        if self.ngram_size < 2 or len(self.history) < self.ngram_size - 1:
            return set()
        key = tuple(self.history[len(self.history) - self.ngram_size + 1 :])
        return set((self._ngrams.get(key) or {}).keys())

    def _append(self, token: int) -> None:
        history, n = self.history, self.ngram_size
        history.append(token)
        if n >= 2 and len(history) >= n:
            self._ngrams[tuple(history[-n:-1])][token] += 1
        leaving = len(history) - self.window - 1  # the n-gram starting here left the window
        if n >= 2 and leaving >= 0:
            key, follower = tuple(history[leaving : leaving + n - 1]), history[leaving + n - 1]
            counts = self._ngrams[key]
            counts[follower] -= 1
            if counts[follower] <= 0:
                del counts[follower]
            if not counts:
                del self._ngrams[key]

    def _flag(self, name: str) -> None:
        self.flags.setdefault(self.current_page, set()).add(name)
