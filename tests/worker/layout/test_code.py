from __future__ import annotations

from ocr_worker.engines.layout.code import code_line, looks_like_code


def test_lines_that_read_as_code() -> None:
    for line in (
        "if (nargout > 1) {",
        "x <- rnorm(5)",
        "12\\def\\CJKpunct@lastkern{",
        "a = p.poly;",
    ):
        assert code_line(line), line
    assert code_line("4\\newif\\if@CJKpunct@dokerning")


def test_sentences_that_quote_code_are_prose() -> None:
    sentence = "Function calls can have tagged arguments, as in plot(x, y, pch = 3) here."
    changelog = "\\__xeCJK_punct_glue:NN:标点符号左/右空白的伸展值不超过原始边界"
    for line in (sentence, changelog, "and so on, as described further below"):
        assert not code_line(line), line


def test_a_block_is_code_when_indented_and_half_code_or_a_transcript() -> None:
    listing = ["for i = 3:10", "fib(i) = fib(i-1) + fib(i-2);", "endfor", "body"]
    assert looks_like_code(listing, indented=True)
    assert not looks_like_code(["cd BUILDDIR", "make"], indented=False)
    assert looks_like_code(["> y", "[1] 4"], indented=True)
    assert not looks_like_code(["x = 1 is set here", "and more prose"], indented=False)
