"""The scoring rules (ocr_worker/accuracy/scoring.py), shared by the real-document suite,
`uocr eval` and the benchmarks."""

from __future__ import annotations

import pymupdf

from ocr_worker.accuracy.scoring import (
    LineOrder,
    PageScore,
    cer,
    document_cer,
    line_order,
    normalise,
    page_order_ok,
    reference_text,
    rows_kept,
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


ROWS = [
    ["pdfauthor", "text", "Sets the document information Author field"],
    ["pdftrapped", "name", "empty", "Sets the document information Trapped entry."],
    ["pdfinfo", "key value", "empty", "Alternative interface for setting the document"],
]


def test_a_table_row_kept_on_one_line_in_order_counts_whatever_separates_its_cells() -> None:
    read = "\n".join("\t".join(row) for row in ROWS)
    assert rows_kept(read, ROWS) == 1.0
    # The recognizer's usual misreadings: a minus for a hyphen, a letter in a long cell.
    assert rows_kept("\u22120 36 36.135\nx", [["-0", "36", "36.135"]]) == 1.0
    assert rows_kept("pdfauthor text Sets the docurnent information Author field", ROWS[:1]) == 1.0


def test_a_table_read_as_two_columns_loses_its_rows() -> None:
    names = "\n".join(" ".join(row[:-1]) for row in ROWS)
    descriptions = "\n".join(row[-1] for row in ROWS)
    assert rows_kept(names + "\n" + descriptions, ROWS) == 0.0
    swapped = "\n".join(" ".join(reversed(row)) for row in ROWS)  # cells out of order
    assert rows_kept(swapped, ROWS) == 0.0
    assert rows_kept("anything", []) is None


def test_a_pages_table_rows_are_its_cells_on_one_baseline_in_the_text_layers_order() -> None:
    from bench.accuracy.runner import table_rows

    with pymupdf.open() as pdf:
        page = pdf.new_page()
        page.insert_text((50, 80), "A line of prose across the page, one cell.")
        for n in range(3):  # two tables side by side, the left one written first
            page.insert_text((50, 120 + 20 * n), f"left{n}")
            page.insert_text((150, 120 + 20 * n), f"value {n}")
        for n in range(3):
            page.insert_text((320, 120 + 20 * n), f"right{n}")
            page.insert_text((420, 120 + 20 * n), f"other {n}")
        rows = table_rows(page)
    assert sorted(map(tuple, rows)) == sorted(
        (f"{side}{n}", f"{word} {n}")
        for side, word in (("left", "value"), ("right", "other"))
        for n in range(3)
    )
