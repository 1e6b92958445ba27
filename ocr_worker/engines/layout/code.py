"""Program text among prose: what makes a block of lines code.

Monospace cannot be seen in the detector's boxes, but code reads as code: calls "f(x)",
assignments, braces and semicolons at line ends, comment and prompt markers, LaTeX commands.
Manuals set code blocks indented (Texinfo's @example, DocBook's screen) or, unindented, as a run
of such lines; a prompt ("$ ", "> ") starts a transcript.
"""

from __future__ import annotations

import re

from ocr_worker.engines.layout.spacing import is_cjk

CODE_LINE = re.compile(
    r"[{};]\s*$|^[{}]|\w\(|\)\s*[{;]|<-|==|!=|:=|\+=|\s=\s|\w=\S|\$\w|\w\[|^\\\w+[\[{]"
    r"|^(#|//|/\*|%)|^(function|def|if|for|while|return|else|end\w*)\b"
)
LINE_NUMBER = re.compile(r"^\d{1,4}\s*(?=\S)")
LEADING_NUMBER = re.compile(r"^(\d{1,5})(?![\d.,:)])")
# Two TeX commands in a line ("\newcount\CJKpunct@cnta"); one may be named in a sentence.
TEX_COMMAND = re.compile(r"\\[A-Za-z@]{2,}")
# Eight plain words make a sentence; a line of code holds a few (a call, a short comment).
SENTENCE_WORDS = 8
PROMPT = re.compile(r"^(\$|>|>>>|#)\s\S")


def code_line(text: str) -> bool:
    """A line of program text. A line mostly of Chinese is prose that names a command (a
    changelog entry "\\cmd: 修正...") or of plain words is a sentence that quotes code."""
    text = text.strip()
    if 3 * sum(is_cjk(c) for c in text) > len(text.replace(" ", "")):
        return False
    if sum(word.isalpha() for word in text.split()) >= SENTENCE_WORDS:
        return False
    text = LINE_NUMBER.sub("", text)  # a numbered listing: "12\def\foo{" is the code "\def\foo{"
    return bool(CODE_LINE.search(text)) or len(TEX_COMMAND.findall(text)) >= 2


def looks_like_code(texts: list[str], *, indented: bool) -> bool:
    """Indented lines, half of them code-like; or unindented lines that all are; or a prompt."""
    if not texts:
        return False
    if _numbered_listing(texts):
        return True
    if PROMPT.match(texts[0]) and (indented or code_line(texts[0])):
        return True  # "> x", "$ make": a transcript (unindented, the command must read as code)
    share = sum(code_line(t) for t in texts) / len(texts)
    # Half: a listing has plain lines too ("else", "make"); all, unindented, since a sentence
    # can hold one call or "=" but a run of them is a program.
    return share >= 0.5 if indented else (len(texts) >= 2 and share == 1.0)


def _numbered_listing(texts: list[str]) -> bool:
    """Three or more lines, nearly all opening with line numbers that count up by one."""
    numbers = [int(m.group(1)) for t in texts if (m := LEADING_NUMBER.match(t))]
    steps = {b - a for a, b in zip(numbers, numbers[1:], strict=False)}
    return len(numbers) >= 3 and len(numbers) >= 0.8 * len(texts) and steps == {1}
