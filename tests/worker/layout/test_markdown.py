from __future__ import annotations

from ocr_worker.engines.layout.markdown import escape_text


def test_body_text_that_looks_like_markdown_syntax_is_escaped_as_commonmark_wants() -> None:
    assert escape_text("# of packages") == "\\# of packages"
    assert escape_text("> quoted") == "\\> quoted"
    assert escape_text("- dash") == "\\- dash"
    assert escape_text("---") == "\\---"
    # A backslash before a digit is a literal backslash: the dot is escaped instead.
    assert escape_text("2024. was a year") == "2024\\. was a year"
    assert escape_text("#hashtag and 3.5 apples") == "#hashtag and 3.5 apples"
