"""Spaces as a reader of mixed Chinese/Japanese and Latin text expects them.

Chinese is written without spaces; Latin words are separated by them; where the two scripts meet,
typesetting (xeCJK, CLREQ) puts a space-sized gap: "Debian 系统", not "Debian系统". Full-width
punctuation carries its own space, so nothing is added next to it.
"""

from __future__ import annotations

import re

# Ideographs (Unified + Extension A + Compatibility), kana and Hangul: characters written
# without spaces between them.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# Full-width and CJK punctuation (、。「」《》（）， ：; ...): no space on either side.
# Curly quotes and the middle dot are shared with Latin text, so they are not in here.
_CJK_PUNCT = "\u3000-\u303f\uff00-\uffef"
_LATIN = "A-Za-z0-9"

_SPACE_INSIDE_CJK = re.compile(rf"(?<=[{_CJK}{_CJK_PUNCT}])[ \t]+(?=[{_CJK}{_CJK_PUNCT}])")
_CJK_THEN_LATIN = re.compile(rf"(?<=[{_CJK}])(?=[{_LATIN}])")
_LATIN_THEN_CJK = re.compile(rf"(?<=[{_LATIN}])(?=[{_CJK}])")
# "2.5Uninstallation", "6Computing on the language": the recognizer ran a heading's section
# number into its first word. A number glued to a capitalised word is never one token.
_GLUED_SECTION = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)(?=[A-Z][a-z]{2,})")


def is_cjk(char: str) -> bool:
    return bool(re.match(rf"[{_CJK}{_CJK_PUNCT}]", char))


def tidy(text: str) -> str:
    """One recognised string: no spaces inside a Chinese run, one between Chinese and Latin."""
    text = " ".join(text.split())
    text = _SPACE_INSIDE_CJK.sub("", text)
    text = _CJK_THEN_LATIN.sub(" ", text)
    text = _GLUED_SECTION.sub(r"\1 ", text)
    return _LATIN_THEN_CJK.sub(" ", text)


def separator(left: str, right: str) -> str:
    """What goes between two pieces of one line (or of a paragraph's wrapped lines)."""
    if not left or not right:
        return ""
    if is_cjk(left[-1]) and is_cjk(right[0]):
        return ""
    if _is_cjk_punct(left[-1]) or _is_cjk_punct(right[0]):
        return ""
    return " "


def join(pieces: list[str]) -> str:
    out = ""
    for piece in pieces:
        if piece:
            out += separator(out, piece) + piece
    return out


def _is_cjk_punct(char: str) -> bool:
    return bool(re.match(rf"[{_CJK_PUNCT}]", char))
