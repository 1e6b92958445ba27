"""The scoring rules (ocr_worker/accuracy/scoring.py), shared by the real-document suite,
`uocr eval` and the benchmarks."""

from __future__ import annotations

from ocr_worker.accuracy.scoring import (
    LineOrder,
    PageScore,
    cer,
    document_cer,
    line_order,
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


LAYER = "\n".join(
    [
        "Name         Popularity   Size",
        "apt-listbugs  1200   44 KB",
        "debian-goodies  880   120 KB",
        "needrestart   2400   90 KB",
        "reportbug-ng  30    210 KB",
    ]
)


def test_a_table_read_row_by_row_keeps_every_line_whole_and_in_order() -> None:
    assert line_order(LAYER.replace("\n", " "), LAYER) == LineOrder(found=1.0, in_order=1.0)


def test_a_table_read_column_by_column_loses_its_rows() -> None:
    rows = [line.split() for line in LAYER.splitlines()]
    by_columns = " ".join(" ".join(cells) for cells in zip(*rows, strict=False))
    assert (line_order(by_columns, LAYER).found or 0.0) < 0.5  # the rows' cells came apart


def test_two_halves_of_a_page_swapped_keep_their_lines_but_not_their_order() -> None:
    lines = LAYER.splitlines()
    swapped = line_order(" ".join(lines[3:] + lines[:3]), LAYER)
    assert swapped.found == 1.0
    assert swapped.in_order is not None and swapped.in_order < 0.7
