from __future__ import annotations

from ocr_worker.engines.reading_order import TextBox, group_paragraphs, order_boxes


def _box(x: float, y: float, text: str, width: float = 200, height: float = 20) -> TextBox:
    return TextBox(x, y, x + width, y + height, text)


def test_two_columns_are_read_column_by_column_not_across() -> None:
    left = [_box(50, 100 + 30 * i, f"L{i}") for i in range(4)]
    right = [_box(400, 100 + 30 * i, f"R{i}") for i in range(4)]
    ordered = order_boxes(right[::-1] + left[::-1])
    assert [b.text for b in ordered] == ["L0", "L1", "L2", "L3", "R0", "R1", "R2", "R3"]


def test_a_full_width_heading_comes_before_both_columns() -> None:
    heading = _box(50, 40, "Title", width=550, height=30)
    left = [_box(50, 100 + 30 * i, f"L{i}") for i in range(3)]
    right = [_box(400, 100 + 30 * i, f"R{i}") for i in range(3)]
    ordered = order_boxes(right + left + [heading])
    assert [b.text for b in ordered] == ["Title", "L0", "L1", "L2", "R0", "R1", "R2"]


def test_words_on_one_line_read_left_to_right() -> None:
    line = [_box(300, 50, "world", 80), _box(50, 52, "hello", 80), _box(140, 49, "there", 80)]
    assert [b.text for b in order_boxes(line)] == ["hello", "there", "world"]


def test_close_lines_form_a_paragraph_and_a_gap_starts_another() -> None:
    boxes = [_box(50, 100, "a"), _box(50, 124, "b"), _box(50, 200, "c")]
    paragraphs = group_paragraphs(order_boxes(boxes))
    assert [p.line_texts for p in paragraphs] == [["a", "b"], ["c"]]
