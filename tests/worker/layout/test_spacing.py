from __future__ import annotations

from ocr_worker.engines.layout.spacing import join, tidy


def test_a_space_between_chinese_and_latin_and_none_inside_chinese() -> None:
    assert tidy("在Debian系统中使用apt安装") == "在 Debian 系统中使用 apt 安装"
    assert tidy("中 文 文本") == "中文文本"
    assert tidy("版本 3.2 的说明，见 第 5 节") == "版本 3.2 的说明，见第 5 节"
    assert tidy("plain  English   text") == "plain English text"


def test_joining_boxes_of_one_line() -> None:
    assert join(["Debian", "系统"]) == "Debian 系统"
    assert join(["中文", "文本"]) == "中文文本"
    assert join(["例如，", "apt"]) == "例如，apt"
    assert join(["hello", "world"]) == "hello world"


def test_a_section_number_run_into_its_title_is_parted() -> None:
    assert tidy("2.5Uninstallation") == "2.5 Uninstallation"
    assert tidy("6Computing on the language") == "6 Computing on the language"
    assert tidy("2Gb of memory") == "2Gb of memory"
