"""The labelled-set format of ``uocr eval`` (ocr_worker/accuracy/dataset.py): what loads, and
the one-line reason when something does not."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ocr_worker.accuracy.dataset import DatasetError, load_dataset

DOC_TOML = """
name = "tiny"
[[documents]]
id = "letter"
file = "letter.pdf"
pages = 2
ground_truth = "letter.jsonl"
covers = "two pages"
"""

LISTED_TWICE = DOC_TOML + DOC_TOML.split('"tiny"')[1]


def _jsonl(path: Path, pages: dict[int, str]) -> None:
    lines = [json.dumps({"page": n, "text": text}) for n, text in pages.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "letter.pdf").write_bytes(b"%PDF-1.7 not read here")
    _jsonl(tmp_path / "letter.jsonl", {2: "second page", 1: "first page"})
    (tmp_path / "dataset.toml").write_text(DOC_TOML, encoding="utf-8")
    return tmp_path


def test_a_toml_set_loads_with_pages_in_page_order(tiny: Path) -> None:
    dataset = load_dataset(tiny)
    (doc,) = dataset.documents
    assert (dataset.name, doc.doc_id, doc.pages, doc.covers) == ("tiny", "letter", 2, "two pages")
    assert doc.ground_truth == ["first page", "second page"]
    assert doc.file == tiny / "letter.pdf"


def test_a_json_set_with_one_text_file_per_page_loads(tmp_path: Path) -> None:
    (tmp_path / "scan.png").write_bytes(b"\x89PNG")
    (tmp_path / "p1.txt").write_text("only page", encoding="utf-8")
    entry = {"id": "scan", "file": "scan.png", "pages": 1, "ground_truth": ["p1.txt"]}
    (tmp_path / "dataset.json").write_text(json.dumps({"documents": [entry]}), encoding="utf-8")
    dataset = load_dataset(tmp_path / "dataset.json")
    assert dataset.name == tmp_path.name  # no name given: the directory's
    assert dataset.documents[0].ground_truth == ["only page"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / "letter.pdf").unlink(), "document 'letter': file"),
        (lambda d: _edit(d, "pages = 2", "pages = 3"), "2 ground-truth pages for pages = 3"),
        (lambda d: _edit(d, "pages = 2", "pages = 0"), "pages must be a whole number >= 1"),
        (lambda d: _edit(d, "covers", "cover"), "unknown keys ['cover']"),
        (lambda d: _edit(d, 'file = "letter.pdf"\n', ""), "'file' is missing"),
        (lambda d: _edit(d, "[[documents]]", "[[documents"), "not valid toml"),
        (lambda d: _jsonl(d / "letter.jsonl", {1: "a", 3: "c"}), "must give pages 1..N"),
        (lambda d: (d / "letter.jsonl").write_text('{"page": 1}\n'), "line 1 is not"),
        (lambda d: _edit(d, DOC_TOML, LISTED_TWICE), "'letter' is listed twice"),
    ],
    ids=[
        "no file",
        "page count",
        "zero pages",
        "typo",
        "no file key",
        "toml",
        "gap",
        "no text",
        "same id",
    ],
)
def test_a_broken_set_is_refused_naming_the_problem(
    tiny: Path, change: Callable[[Path], object], message: str
) -> None:
    change(tiny)
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_dataset(tiny)


def test_a_missing_set_or_definition_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nowhere")
    with pytest.raises(DatasetError, match=r"has no dataset\.toml or dataset\.json"):
        load_dataset(tmp_path)


def _edit(root: Path, old: str, new: str) -> None:
    path = root / "dataset.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
