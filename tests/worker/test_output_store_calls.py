"""A group's page objects written, and a document's read back, several calls at a time: every
page lands under its own key and comes back in its place; a failed write is never hidden."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ocr_worker.outputs import pages, readback
from uocr_core import object_keys
from uocr_core.contracts import PageResult
from uocr_core.storage import LocalObjectStore


def _result(page: int) -> PageResult:
    return PageResult(page=page, status="succeeded", text=f"text of page {page}")


def test_every_page_is_written_to_its_own_key_and_read_back_in_order(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    results = [_result(p) for p in range(1, 21)]  # more pages than calls at once
    keys = pages.write_pages(store, "job", results)
    assert keys == {p: object_keys.page_result_key("job", p) for p in range(1, 21)}
    rows = [
        SimpleNamespace(page_no=p, result_key=keys[p], status="succeeded", error=None)
        for p in range(1, 21)
    ]
    rows[6] = SimpleNamespace(page_no=7, result_key=None, status="failed", error="unreadable")
    rows[12] = SimpleNamespace(page_no=13, result_key=None, status="canceled", error=None)
    loaded = readback.load_page_results(store, SimpleNamespace(pages=rows))  # type: ignore[arg-type]
    assert [r.page for r in loaded] == list(range(1, 21))
    assert [r.text for r in loaded if r.status == "succeeded"] == [
        f"text of page {p}" for p in range(1, 21) if p not in (7, 13)
    ]
    assert (loaded[6].status, loaded[6].error) == ("failed", "unreadable")
    assert loaded[12].status == "canceled"


def test_a_page_that_cannot_be_written_fails_the_group(tmp_path: Path) -> None:
    class FlakyStore(LocalObjectStore):
        def put(self, key: str, data: bytes, content_type: str = "text/plain") -> None:
            if key == object_keys.page_result_key("job", 5):
                raise OSError("the store refused page 5")
            super().put(key, data, content_type)

    with pytest.raises(OSError, match="page 5"):
        pages.write_pages(FlakyStore(tmp_path), "job", [_result(p) for p in range(1, 9)])
