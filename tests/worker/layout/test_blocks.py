"""Blocks and Markdown of whole pages, on detections shaped like RapidOCR's on tilted scans."""

from __future__ import annotations

from ocr_worker.engines.rapidocr import page_result_from_boxes
from tests.worker.layout.scans import PAGE, Straight, paragraph, scan
from uocr_core.contracts import PageResult


def _page(boxes: list[Straight], degrees: float = 0.7) -> PageResult:
    detections = scan(boxes, degrees=degrees)
    return page_result_from_boxes(1, detections, width=int(PAGE[0]), height=int(PAGE[1]))


def _body(y: float = 300, count: int = 6, tag: str = "body") -> list[Straight]:
    return paragraph(200, y, [f"{tag} line {n} " + "w" * 70 for n in range(count)])


def test_running_head_and_page_number_are_their_own_blocks_and_out_of_the_markdown() -> None:
    head = [Straight(200, 120, "Chapter 5. Managing Packages"), Straight(1440, 120, "32")]
    foot = [Straight(200, 2050, "Printed 2024-05-01"), Straight(1380, 2050, "- 33 -")]
    result = _page(head + _body() + foot)
    labels = [block.label for block in result.blocks]
    assert labels == ["header", "page_number", "text", "footer", "page_number"]
    assert result.text.endswith("\nPrinted 2024-05-01\n- 33 -")
    assert result.text.startswith("Chapter 5. Managing Packages\n32\nbody line 0")
    assert "Managing Packages" not in result.markdown and "32" not in result.markdown
    assert result.markdown.startswith("body line 0")


def test_headings_come_from_size_across_the_baseline_not_from_tilt_inflated_boxes() -> None:
    # At 1.2 degrees a 1300 px body line's bounds are 27 px taller than its text: the old
    # reading took every such line for a title.
    chapter = Straight(200, 120, "Chapter Three", height=64)
    heading = Straight(200, 250, "3.1 Installing packages", height=48)
    big = Straight(200, 700, "Another Part", height=50)
    boxes = [chapter, heading] + _body(330, 6, "a") + [big] + _body(790, 6, "b")
    result = _page(boxes, degrees=1.2)
    titles = [b.text for b in result.blocks if b.label == "title"]
    assert titles == ["Chapter Three", "3.1 Installing packages", "Another Part"]
    start = "# Chapter Three\n\n## 3.1 Installing packages\n\na line 0 "
    assert result.markdown.startswith(start)
    assert "\n\n## Another Part\n\n" in result.markdown  # 50/34: about LaTeX's \Large


def test_code_is_fenced_with_its_indentation_and_prose_around_it_stays_prose() -> None:
    code = [
        Straight(300, 510, "if (nargout > 1) {"),
        Straight(364, 540, "y = polyval(p, x);"),
        Straight(300, 570, "}"),
    ]
    boxes = _body(300, 6, "a") + code + _body(620, 4, "b")
    md = _page(boxes).markdown
    assert "\n\n```\nif (nargout > 1) {\n    y = polyval(p, x);\n}\n```\n\n" in md
    assert md.endswith("b line 3 " + "w" * 70)


def test_a_table_becomes_a_markdown_table_row_by_row() -> None:
    rows = [("Operation", "Method"), ("a+b", "plus (a, b)"), ("a-b", "minus (a, b)")]
    boxes = _body(300, 3)
    for n, (op, method) in enumerate(rows):
        boxes += [Straight(260, 420 + 30 * n, op), Straight(700, 420 + 30 * n, method)]
    result = _page(boxes)
    table = "| Operation | Method |\n| --- | --- |\n| a+b | plus (a, b) |\n| a-b | minus (a, b) |"
    assert table in result.markdown
    assert [b.label for b in result.blocks] == ["text", "table"]


def test_list_items_are_listed_and_chinese_lines_join_without_spaces() -> None:
    items = [Straight(200, 300, "• first item"), Straight(200, 330, "• second item")]
    chinese = paragraph(
        200, 420, ["在Debian系统中可以使用这个命令安装所需要的", "软件包和它们的依赖。"]
    )
    md = _page(items + chinese).markdown
    joined = "在 Debian 系统中可以使用这个命令安装所需要的软件包和它们的依赖。"
    assert md == "- first item\n- second item\n\n" + joined


def test_text_that_merely_starts_like_markdown_syntax_is_escaped() -> None:
    sentence = "# of packages installed on this system is what the next command shows you"
    boxes = _body(300, 3) + paragraph(200, 420, [sentence, "and nothing more than that."])
    md = _page(boxes).markdown
    assert "\n\n\\# of packages installed" in md and "\n# " not in md


def test_a_running_head_set_larger_than_body_text_is_furniture_when_it_ends_in_a_number() -> None:
    # Texinfo's heads measure taller than its body text; a chapter title at the top of a page
    # does too, but it does not end in a page number boxed apart.
    head = [Straight(200, 120, "Function and variable index", height=42)]
    head += [Straight(1440, 124, "224", height=38)]
    title = [Straight(200, 120, "Function and variable index", height=42)]
    with_number = _page(head + _body(300)).blocks
    without = _page(title + _body(300)).blocks
    assert [b.label for b in with_number][:2] == ["header", "page_number"]
    assert without[0].label == "title"


def test_a_last_line_after_a_break_without_a_page_number_stays_in_the_body() -> None:
    note = Straight(
        200, 2000, "1 The C code is in files base.c and graphics.c of src/main" + "!" * 40
    )
    code = Straight(260, 2000, "function p = polynomial (a)")
    for last in (note, code):
        result = _page(_body(300) + [last])
        assert result.blocks[-1].label not in ("footer", "page_number")
        assert last.text in result.markdown


def test_an_r_transcript_with_continuation_prompts_is_one_code_block() -> None:
    transcript = ["> { x <- 0", "+ x + 5", "+ }", "[1] 5"]
    boxes = _body(300, 3) + [Straight(300, 420 + 30 * n, t) for n, t in enumerate(transcript)]
    md = _page(boxes).markdown
    assert md.endswith("\n\n```\n" + "\n".join(transcript) + "\n```")
    assert (
        "3.2.1 if" in _page([Straight(200, 250, "3.2.1 if")] + _body(330)).markdown.split("\n")[0]
    )


def test_a_numbered_listing_is_code_not_a_table_of_line_numbers() -> None:
    # The recognizer boxes each line number apart from its indented code: clear stripes.
    code = ["\\cs_new:Npn \\foo:w", "{", "\\bool_if:NTF \\l_tmpa_bool", "{ \\bar: }", "}"]
    boxes = _body(300, 3)
    for n, line in enumerate(code):
        boxes += [Straight(200, 420 + 30 * n, str(1070 + n)), Straight(300, 420 + 30 * n, line)]
    result = _page(boxes)
    assert [b.label for b in result.blocks] == ["text", "code"]
    assert "\n\n```\n1070 \\cs_new:Npn \\foo:w\n1071 {\n" in result.markdown
