"""Names a folder's documents get in a batch, and the files their results go to: two inputs
never share one, so no result overwrites another (the e2e round trip is in test_batches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uocr_client.archive import collect, output_paths


def _touch(path: Path, content: bytes = b"%PDF-1.7") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_two_boxes_with_the_same_file_names_stay_two_sets_of_documents(tmp_path: Path) -> None:
    for box in ("box-1", "box-2"):
        _touch(tmp_path / box / "scan-001.pdf")
    names = [name for _, name in collect([tmp_path / "box-1", tmp_path / "box-2"], recursive=False)]
    assert names == ["box-1/scan-001.pdf", "box-2/scan-001.pdf"]
    alone = [name for _, name in collect([tmp_path / "box-1"], recursive=False)]
    assert alone == ["scan-001.pdf"]  # one folder: names relative to it, as before


def test_two_files_that_would_share_a_name_are_refused_and_one_file_given_twice_counts_once(
    tmp_path: Path,
) -> None:
    first = _touch(tmp_path / "a" / "box" / "x.pdf")
    _touch(tmp_path / "b" / "box" / "x.pdf")
    with pytest.raises(ValueError, match=r"box/x\.pdf"):
        collect([tmp_path / "a" / "box", tmp_path / "b" / "box"], recursive=False)
    assert collect([first, first], recursive=False) == [(first, "x.pdf")]


def test_inputs_differing_only_in_suffix_get_results_of_their_own(tmp_path: Path) -> None:
    sources = ["box/scan.pdf", "box/scan.png", "box/other.tif", "scan.pdf"]
    markdown = output_paths(tmp_path, sources, "markdown")
    assert markdown == {
        "box/scan.pdf": tmp_path / "box" / "scan.pdf.md",
        "box/scan.png": tmp_path / "box" / "scan.png.md",
        "box/other.tif": tmp_path / "box" / "other.md",
        "scan.pdf": tmp_path / "scan.md",
    }
    pdf = output_paths(tmp_path, sources, "pdf")
    assert pdf["box/scan.png"] == tmp_path / "box" / "scan.png.ocr.pdf"
    assert len(set(pdf.values())) == len(sources)


def test_the_cli_names_the_two_files_in_one_line_and_sends_nothing(tmp_path: Path) -> None:
    from tests.cli.conftest import UNREACHABLE, uocr

    _touch(tmp_path / "a" / "box" / "x.pdf")
    _touch(tmp_path / "b" / "box" / "x.pdf")
    env = {**UNREACHABLE, "UOCR_URL": "http://127.0.0.1:4", "UOCR_API_KEY": "uocr_k"}
    done = uocr("submit", str(tmp_path / "a" / "box"), str(tmp_path / "b" / "box"), env=env)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()  # refused before any connection is tried
    assert line.startswith("error: ") and line.endswith("box/x.pdf: give them different names")
