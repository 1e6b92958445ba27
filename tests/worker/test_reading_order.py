"""Reading order on detections shaped like RapidOCR's on tilted scans."""

from __future__ import annotations

from ocr_worker.engines.layout import layout_page
from tests.worker.layout.scans import CHAR, PAGE, PITCH, Straight, paragraph, scan


def _read(boxes: list[Straight], degrees: float = 0.7) -> list[str]:
    blocks = layout_page(scan(boxes, degrees=degrees), width=PAGE[0], height=PAGE[1])
    return [line for block in blocks for line in block.text.split("\n")]


def _prose(tag: str, count: int, chars: int = 80) -> list[str]:
    return [f"{tag}{n} " + "x" * (chars - len(tag) - 3) for n in range(count)]


def test_a_tilted_paragraph_with_an_indented_first_line_reads_line_after_line() -> None:
    # Regression: touching line boxes left no empty stripe, and the fallback sorted by left
    # edge, so the indented first line came last.
    first = _prose("a", 6)
    second = _prose("b", 5)
    boxes = paragraph(200, 300, first) + paragraph(200, 300 + 30 * 6, second)
    assert _read(boxes) == first + second
    assert _read(boxes, degrees=-0.9) == first + second


def test_two_columns_read_column_by_column_after_a_full_width_heading() -> None:
    heading = Straight(200, 200, "Chapter 3 Installing", width=1300, height=48)
    left = _prose("L", 12, chars=40)
    right = _prose("R", 12, chars=40)
    boxes = [heading] + paragraph(200, 280, left, indent=0) + paragraph(880, 280, right, indent=0)
    assert _read(boxes) == ["Chapter 3 Installing", *left, *right]


def test_a_table_with_an_empty_vertical_stripe_reads_row_by_row() -> None:
    # A narrow label column beside a wide one: the stripe between them is no gutter.
    labels = [f"-{c}" for c in "abcdefgh"]
    meanings = [f"meaning of option {c} in words" for c in "abcdefgh"]
    boxes = [Straight(220, 300 + 30 * n, label) for n, label in enumerate(labels)]
    boxes += [Straight(600, 300 + 30 * n, text) for n, text in enumerate(meanings)]
    lines = _read(boxes)
    assert lines == [f"{a}\t{b}" for a, b in zip(labels, meanings, strict=True)]


def test_a_two_column_index_reads_each_entry_with_its_page_number() -> None:
    # Dot leaders are dropped by the detector, so each column has its own stripe between
    # entries and numbers; only the one between the columns is a gutter.
    def column(x: float, tag: str) -> list[Straight]:
        rows = []
        for n in range(20):
            rows.append(Straight(x, 300 + 30 * n, f"{tag}entry{n}", width=200))
            rows.append(Straight(x + 530, 300 + 30 * n, str(10 + n), width=40))
        return rows

    lines = _read(column(200, "a") + column(880, "b"))
    expected = [f"{tag}entry{n}\t{10 + n}" for tag in "ab" for n in range(20)]
    assert lines == expected


def test_an_indented_table_inside_a_single_column_is_no_pair_of_columns() -> None:
    # Program output: two blocks of cells side by side, indented in the text; both sides are
    # wide enough to be columns, but together they do not fill the text's width.
    intro = _prose("i", 2)
    cells = [Straight(320, 400 + 30 * n, f"{n} C:\\\\bdr NA", width=320) for n in range(1, 4)] + [
        Straight(760, 400 + 30 * n, f"Sheet{n}$ SYSTEM TABLE NA", width=380) for n in range(1, 4)
    ]
    lines = _read(paragraph(200, 300, intro, indent=0) + cells)
    assert lines[:2] == intro
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "3"]


def test_boxes_side_by_side_on_one_line_read_left_to_right() -> None:
    boxes = [Straight(900, 400, "world"), Straight(200, 400, "hello"), Straight(520, 401, "there")]
    assert " ".join(_read(boxes)).split() == ["hello", "there", "world"]


def test_a_full_width_table_of_short_cells_is_no_set_of_columns() -> None:
    # Three columns of similar width spanning the text, but their cells are as long as their
    # content ("a+b" beside "plus (a, b)"): page columns are filled with running text.
    rows = [("Operation name", "Method called", "Its description")]
    rows += [("a+b", "plus (a, b)", "Binary addition"), ("a-b", "minus (a, b)", "Subtraction")]
    rows += [(f"op{n}", f"call{n} (a)", f"Meaning {n}") for n in range(6)]
    boxes = paragraph(200, 200, _prose("p", 2), indent=0)
    for n, cells in enumerate(rows):
        columns = zip((200, 650, 1100), cells, strict=True)
        boxes += [Straight(x, 300 + 30 * n, cell) for x, cell in columns]
    lines = _read(boxes)
    assert lines[2:] == ["\t".join(cells) for cells in rows]


def test_a_wide_table_of_many_columns_reads_row_by_row() -> None:
    # Ten clear stripes: no page is set in that many columns, so none is tried as a gutter
    # (trying every combination of them took seconds).
    rows = [[f"r{r}c{c}" for c in range(11)] for r in range(8)]
    boxes = [
        Straight(200 + 125 * c, 300 + 30 * r, cell, width=80)
        for r, row in enumerate(rows)
        for c, cell in enumerate(row)
    ]
    assert _read(boxes) == ["\t".join(row) for row in rows]


def test_two_words_run_together_across_a_narrow_gutter_do_not_break_the_columns() -> None:
    # The recognizer read a left line's page number and the right column's heading as one box
    # ("94v3.2.9"); the columns still read whole, that box going where its centre lies.
    left = _prose("L", 12, chars=38)
    right = _prose("R", 12, chars=38)
    boxes = paragraph(200, 300, left, indent=0) + paragraph(860, 300, right, indent=0)
    boxes = [b for b in boxes if b.text not in (left[6], right[6])]
    boxes += [Straight(200, 480, left[6][:30]), Straight(760, 480, "94v3.2.9", width=150)]
    boxes += [Straight(1000, 480, right[6][10:])]
    lines = _read(boxes)
    assert lines[:6] == left[:6] and lines[-5:] == right[-5:]
    assert lines.index(left[11]) < lines.index(right[0])


def test_a_full_width_heading_between_column_sets_still_parts_them() -> None:
    top_left, top_right = _prose("a", 4, chars=38), _prose("b", 4, chars=38)
    low_left, low_right = _prose("c", 4, chars=38), _prose("d", 4, chars=38)
    boxes = paragraph(200, 300, top_left, indent=0) + paragraph(860, 300, top_right, indent=0)
    boxes.append(Straight(200, 440, "Section 2 Installing the packages", width=1200))
    boxes += paragraph(200, 500, low_left, indent=0) + paragraph(860, 500, low_right, indent=0)
    expected = [*top_left, *top_right, "Section 2 Installing the packages", *low_left, *low_right]
    assert _read(boxes) == expected


def _wrapping_table(top: float, rows: int) -> tuple[list[Straight], list[list[str]]]:
    """Option | type | default | description, the description wrapping over one to four lines
    (a package's option table): the label side and the description are of similar widths, both
    filled, like two page columns, but the label side holds a line only where a row starts."""
    boxes, expected, y = [], [], top
    for n in range(rows):
        words = [f"d{n}w{k}" for k in range(1 + 6 * (n % 4))]
        wrapped = [" ".join(words[k : k + 6]) + " " + "x" * 12 for k in range(0, len(words), 6)]
        if n == 3:  # a long name runs into the type column, a long type into the default's:
            boxes += [Straight(200, y, f"opt{n}name name", width=390)]  # no stripe left
        else:  # clear down the label side
            boxes += [Straight(200, y, f"opt{n}name", width=250)]
            boxes += [
                Straight(520, y, "key value" if n == 6 else "name", width=70 + 130 * (n == 6))
            ]
        boxes += [Straight(650 + 80 * (n == 6), y, "empty", width=90)]
        for k, part in enumerate(wrapped):  # a cell's last line ends short
            boxes.append(
                Straight(880, y + PITCH * k, part, width=560 if k + 1 < len(wrapped) else 300)
            )
        expected.append([f"opt{n}name", *wrapped])
        y += PITCH * len(wrapped)
    return boxes, expected


def _in_rows(text: str, expected: list[list[str]]) -> bool:
    """Every row's pieces in order, each row after the one before."""
    at = -1
    for row in expected:
        for piece in row:
            found = text.find(piece, at + 1)
            if found < 0:
                return False
            at = found
    return True


def test_a_table_whose_last_column_wraps_reads_row_by_row_not_as_two_columns() -> None:
    # Regression: the label side and the wrapping descriptions were read as two page columns,
    # every name first, then every description.
    boxes, expected = _wrapping_table(300, 16)
    blocks = layout_page(scan(boxes), width=PAGE[0], height=PAGE[1])
    assert [b.label for b in blocks] == ["table"]
    assert _in_rows(blocks[0].text, expected)
    assert len(blocks[0].rows) == 16


def test_two_wrapped_cells_boxed_as_one_keep_the_table_whole() -> None:
    # The detector ran the type column's wrapped "list" and the description's last word
    # together; the table goes on past that line, the two words in their own cells.
    boxes, expected = _wrapping_table(300, 12)
    wrapped = next(b for b in boxes if b.text == expected[5][2])  # row 5's last line, a word
    boxes.remove(wrapped)
    expected[5][2] = "information."
    width = 880 - 520 + CHAR * len(expected[5][2])  # from "list" to the word's end
    boxes.append(Straight(520, wrapped.y, f"list {expected[5][2]}", width=width))
    blocks = layout_page(scan(boxes), width=PAGE[0], height=PAGE[1])
    assert [b.label for b in blocks] == ["table"]
    assert _in_rows(blocks[0].text, expected)
    row = next(cells for cells in blocks[0].rows if cells[0].startswith("opt5name"))
    assert row[0].endswith("list") and row[-1].endswith("information.")  # each in its cell


def test_two_tables_side_by_side_read_one_after_the_other_above_their_caption() -> None:
    # Two groups of command | glyph | code (a font guide's symbol tables): each group is read
    # whole, then the caption under both, which crosses every stripe of the two.
    def group(x: float, tag: str) -> list[Straight]:
        cells = []
        for n in range(20):
            cells.append(Straight(x, 300 + PITCH * n, f"\\{tag}symbol{n}", width=220))
            if n % 3:  # the detector skips some glyphs
                cells.append(Straight(x + 270, 300 + PITCH * n, "$", width=20))
            cells.append(Straight(x + 340, 300 + PITCH * n, str(100 + n), width=50))
        return cells

    caption = Straight(400, 300 + PITCH * 21, "Table 2: Text symbols of the package", width=700)
    text = "\n".join(_read(group(200, "a") + group(860, "b") + [caption]))
    firsts = [f"\\asymbol{n}" for n in range(20)] + [f"\\bsymbol{n}" for n in range(20)]
    assert _in_rows(text, [[first] for first in firsts] + [[caption.text]])


def test_a_column_of_paragraphs_apart_by_blank_lines_beside_another_is_no_table() -> None:
    # Regression: the right column's lines (fewer, on the left's baselines, with gaps where its
    # paragraphs break) looked like a table's row heads beside wrapped cells; but beside a
    # paragraph break the left column's lines run on, full, where a cell would end short.
    left = _prose("L", 30, chars=38)
    right, y = [], 300.0
    for n in range(6):
        right += [Straight(880, y + PITCH * k, f"R{n}.{k} " + "x" * 33) for k in range(4)]
        y += PITCH * 5  # four lines, then a blank one
    lines = _read(paragraph(200, 300, left, indent=0) + right)
    assert lines[:30] == left
    assert lines[30:] == [box.text for box in right]
