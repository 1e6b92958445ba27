"""The scoring rules (ocr_worker/accuracy/scoring.py), shared by the real-document suite,
`uocr eval` and the benchmarks."""

from __future__ import annotations

from ocr_worker.accuracy.scoring import (
    PageScore,
    cer,
    document_cer,
    normalise,
    page_order_ok,
    reference_text,
)


def test_line_breaks_and_runs_of_spaces_do_not_count() -> None:
    text = "Sources,  binaries\nand\n\ndocumentation "
    assert normalise(text) == "Sources, binaries and documentation"


def test_ligatures_and_full_width_forms_read_as_their_characters() -> None:
    assert normalise("ﬁle：ＣＪＫ") == "file:CJK"


def test_no_space_survives_inside_chinese_text() -> None:
    assert normalise("用于\n排版中日韩 （CJK） 文字。 第二句") == "用于排版中日韩(CJK)文字。第二句"


def test_dot_leaders_are_filler_whatever_their_length() -> None:
    assert normalise("bessel_i . . . . . . . 12") == "bessel_i 12"
    assert normalise("bessel_i ........... 12") == "bessel_i 12"


def test_the_reference_spaces_chinese_from_latin_as_typeset() -> None:
    # MuPDF reports xeCJK's gap on one side only; a reader sees both.
    assert reference_text("xeCJK 是一个XeLaTeX 宏包，第1 节") == "xeCJK 是一个 XeLaTeX 宏包,第 1 节"


def test_a_missing_chinese_latin_space_is_an_error() -> None:
    reference = reference_text("使用 Debian 系统")
    assert cer("使用 Debian 系统", reference) == 0
    assert cer("使用Debian系统", reference) == 2 / len(reference)


def test_lines_out_of_order_cost_characters() -> None:
    reference = reference_text("first line of a paragraph\nsecond line of it")
    assert cer("first line of a paragraph\nsecond line of it", reference) == 0
    assert cer("second line of it\nfirst line of a paragraph", reference) > 0.5


def test_document_cer_weighs_pages_by_their_length() -> None:
    assert document_cer([PageScore(1, 10), PageScore(9, 90)]) == 0.1
    assert document_cer([]) == 0


def test_page_order_needs_every_page_in_its_place() -> None:
    refs = [reference_text(t) for t in ("alpha beta gamma", "delta epsilon", "zeta eta theta")]
    assert page_order_ok(["alpha beta gamma", "delta epsilon", "zeta eta theta"], refs)
    assert not page_order_ok(["delta epsilon", "alpha beta gamma", "zeta eta theta"], refs)
    assert not page_order_ok(["alpha beta gamma", "zeta eta theta"], refs)
    assert not page_order_ok(["alpha beta gamma", "alpha beta gamma", "zeta eta theta"], refs)
