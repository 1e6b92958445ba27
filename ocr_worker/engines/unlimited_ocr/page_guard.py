"""The page guard: every input page yields one section, in order, and no page loops unseen.

Rules, applied per decode step on token ids (torch-free):
- end-of-sequence is refused before the last page;
- a page that reaches its token budget is closed (the page marker is forced, or EOS on the
  last page) and flagged ``token_budget_exhausted``;
- no n-gram of ``ngram_size`` may repeat within the last ``window`` ids (prompt included);
  when the model's own choice was such a repeat, the page is flagged ``repetition_loop``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

BUDGET_FLAG = "token_budget_exhausted"
LOOP_FLAG = "repetition_loop"


@dataclass
class PageGuard:
    num_pages: int
    eos_id: int
    page_marker: tuple[int, ...]  # the ids of "<PAGE>" (ordinary text in v1)
    page_budget: int
    ngram_size: int = 35
    window: int = 1024
    history: list[int] = field(default_factory=list)  # prompt + generated, for n-grams
    page_index: int = 0
    tokens_in_page: int = 0
    flags: dict[int, set[str]] = field(default_factory=dict)
    _forced: list[int] = field(default_factory=list)
    # (n-1)-gram -> counts of the ids that followed it, over the last ``window`` ids only.
    _ngrams: defaultdict[tuple[int, ...], Counter[int]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    finished: bool = False

    def seed(self, prompt_ids: list[int]) -> None:
        """The prompt counts for n-grams but opens no page."""
        for token in prompt_ids[-self.window :]:
            self._append(token)

    @property
    def on_last_page(self) -> bool:
        return self.page_index >= self.num_pages - 1

    def forced_token(self) -> int | None:
        """A token the guard imposes this step (closing a page over budget), or None."""
        if not self._forced and self.tokens_in_page >= self.page_budget:
            self._flag(BUDGET_FLAG)
            self._forced = [self.eos_id] if self.on_last_page else list(self.page_marker)
        return self._forced[0] if self._forced else None

    def banned(self) -> set[int]:
        """Ids the next token may not be."""
        banned = self._repeat_completions()
        if not self.on_last_page:
            banned.add(self.eos_id)
        return banned

    def observe(self, token: int, *, wanted: int | None = None) -> None:
        """Record the chosen token; ``wanted`` is the model's choice before the bans."""
        if self._forced:
            self._forced.pop(0)
        if wanted is not None and wanted != token and wanted in self._repeat_completions():
            self._flag(LOOP_FLAG)
        self._append(token)
        self.tokens_in_page += 1
        if token == self.eos_id:
            self.finished = True
        elif self._ends_with_marker() and not self.on_last_page:
            self.page_index += 1
            self.tokens_in_page = 0

    def _ends_with_marker(self) -> bool:
        n = len(self.page_marker)
        return n > 0 and tuple(self.history[-n:]) == self.page_marker

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
        self.flags.setdefault(self.page_index, set()).add(name)
