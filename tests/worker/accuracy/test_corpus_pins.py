"""The accuracy corpus is pinned: every package it reads has a version and a sha256, and a
package whose bytes differ from the pin fails the fetch naming it (never shifted pages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.accuracy.corpus import (
    CI_DOCUMENTS,
    EXTRA_DOCUMENTS,
    PINNED,
    TABLE_DOCUMENTS,
    CorpusChanged,
    verify_pinned,
)


def test_every_package_of_the_corpus_is_pinned() -> None:
    documents = CI_DOCUMENTS + EXTRA_DOCUMENTS + TABLE_DOCUMENTS
    assert {doc.package for doc in documents} <= PINNED.keys()


def test_a_package_that_changed_under_its_version_fails_the_fetch(tmp_path: Path) -> None:
    deb = tmp_path / "r-doc-pdf_4.2.2.20221110-2_all.deb"
    deb.write_bytes(b"!<arch>\nnot the pinned package")
    with pytest.raises(CorpusChanged, match="r-doc-pdf 4.2.2.20221110-2 is pinned at beb104"):
        verify_pinned("r-doc-pdf", deb)
