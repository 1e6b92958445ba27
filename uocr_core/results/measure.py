"""How a chunk's size is counted: in characters, or in the tokens of a tokenizer the caller
names (a Hugging Face ``tokenizer.json``, read with the ``tokenizers`` library, offline).

A chunk's size is the sum of its pieces' sizes and of what joins them (a blank line). Tokens
are counted a piece at a time: pieces are joined at white space, where no tokenizer that
splits words first merges across, so the sum is the joined text's count (checked with a real
tokenizer in tests/worker/test_chunk_tokens.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from uocr_core.errors import InvalidRequest, ServiceUnavailable

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_MAX_CHARS = 1500  # about 400 tokens of English: a common retrieval chunk


class Measure(Protocol):
    @property
    def limit(self) -> int: ...

    @property
    def join(self) -> int:
        """What a blank line between two pieces counts."""
        ...

    def size(self, text: str) -> int: ...

    def fitting(self, text: str, begin: int, room: int) -> int:
        """How many characters of ``text`` from ``begin`` fit within ``room``."""
        ...


@dataclass(frozen=True)
class Chars:
    limit: int = DEFAULT_MAX_CHARS
    join: int = 2

    def size(self, text: str) -> int:
        return len(text)

    def fitting(self, text: str, begin: int, room: int) -> int:
        return room


@dataclass(frozen=True)
class Tokens:
    limit: int
    tokenizer_path: Path
    join: int = 1

    def size(self, text: str) -> int:
        return len(_tokenizer(self.tokenizer_path).encode(text, add_special_tokens=False).ids)

    def fitting(self, text: str, begin: int, room: int) -> int:
        """The run from ``begin`` that its first ``room`` tokens cover: the text tokenised
        once, cut where token ``room`` ends (at least one character)."""
        rest = text[begin:]
        encoded = _tokenizer(self.tokenizer_path).encode(rest, add_special_tokens=False)
        if len(encoded.ids) <= room:
            return len(rest)
        return max(1, encoded.offsets[room - 1][1]) if room >= 1 else 1


def tokens(limit: int, name: str, known: dict[str, Path]) -> Tokens:
    """A token measure by the tokenizer's name, as the deployment lists them (a 422 naming the
    ones it has, for another name)."""
    if name not in known:
        names = ", ".join(sorted(known)) or "none: the deployment lists none (chunk_tokenizers)"
        raise InvalidRequest(f"no tokenizer named {name!r}; this deployment has {names}")
    _tokenizer(known[name])  # read now: a file that cannot be is the deployment's fault
    return Tokens(limit, known[name])


@functools.cache
def _tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer  # only where tokens are counted

    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # missing, unreadable, not a tokenizer.json
        raise ServiceUnavailable(f"the tokenizer file {path} cannot be read: {error}") from None
