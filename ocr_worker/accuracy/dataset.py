"""A labelled regression set: documents and the text each of their pages must read as.

A directory holding ``dataset.toml`` (or ``dataset.json``, the same shape)::

    name = "regression"                    # optional, shown in the report
    [[documents]]
    id = "r-data-xref"                     # unique; names the document in the report
    file = "r-data-xref.pdf"               # relative to the directory: a PDF or an image
    pages = 3                              # the page count the document must come back with
    ground_truth = "r-data-xref.jsonl"     # one {"page": n, "text": "..."} per page, n = 1..pages
    # ground_truth = ["gt/1.txt", "gt/2.txt", "gt/3.txt"]   # or one text file per page, in order
    covers = "cross-page references"       # optional: what the document exercises

Ground truth is the page's plain text; it is normalised for scoring (``scoring.reference_text``).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFINITION_NAMES = ("dataset.toml", "dataset.json")
_DOCUMENT_KEYS = {"id", "file", "pages", "ground_truth", "covers"}


class DatasetError(ValueError):
    """The set cannot be used as given; the message names the file and what is wrong."""


@dataclass(frozen=True)
class LabelledDocument:
    doc_id: str
    file: Path
    ground_truth: list[str]  # one text per page, page 1 first
    covers: str = ""

    @property
    def pages(self) -> int:
        return len(self.ground_truth)


@dataclass(frozen=True)
class Dataset:
    name: str
    definition: Path
    documents: list[LabelledDocument]

    @property
    def pages(self) -> int:
        return sum(doc.pages for doc in self.documents)


def load_dataset(path: Path) -> Dataset:
    """The set at ``path`` (its directory or its definition file), checked whole before use."""
    definition = _definition_file(path)
    raw = _parse(definition)
    entries = raw.get("documents")
    if not isinstance(entries, list) or not entries:
        raise DatasetError(f"{definition}: no [[documents]] listed")
    documents = [_document(definition, entry, n) for n, entry in enumerate(entries, start=1)]
    seen: set[str] = set()
    for doc in documents:
        if doc.doc_id in seen:
            raise DatasetError(f"{definition}: document id {doc.doc_id!r} is listed twice")
        seen.add(doc.doc_id)
    return Dataset(str(raw.get("name") or definition.parent.name), definition, documents)


def _definition_file(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise DatasetError(f"dataset {path} does not exist")
    for name in DEFINITION_NAMES:
        if (path / name).is_file():
            return path / name
    raise DatasetError(f"dataset {path} has no {' or '.join(DEFINITION_NAMES)}")


def _parse(definition: Path) -> dict[str, Any]:
    try:
        if definition.suffix == ".json":
            raw = json.loads(definition.read_text(encoding="utf-8"))
        else:
            raw = tomllib.loads(definition.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:  # TOMLDecodeError, JSONDecodeError
        raise DatasetError(f"{definition}: not valid {definition.suffix[1:]}: {error}") from None
    if not isinstance(raw, dict):
        raise DatasetError(f"{definition}: expected a table with [[documents]]")
    return raw


def _document(definition: Path, entry: Any, n: int) -> LabelledDocument:
    where = f"{definition}: document {n}"
    if not isinstance(entry, dict):
        raise DatasetError(f"{where}: expected a table")
    if unknown := sorted(set(entry) - _DOCUMENT_KEYS):
        raise DatasetError(f"{where}: unknown keys {unknown}; known are {sorted(_DOCUMENT_KEYS)}")
    for key in ("id", "file", "pages", "ground_truth"):
        if key not in entry:
            raise DatasetError(f"{where}: {key!r} is missing")
    doc_id = str(entry["id"])
    where = f"{definition}: document {doc_id!r}"
    pages = entry["pages"]
    if not isinstance(pages, int) or isinstance(pages, bool) or pages < 1:
        raise DatasetError(f"{where}: pages must be a whole number >= 1, not {pages!r}")
    file = _existing(definition.parent, entry["file"], where)
    truth = _ground_truth(definition.parent, entry["ground_truth"], where)
    if len(truth) != pages:
        raise DatasetError(f"{where}: {len(truth)} ground-truth pages for pages = {pages}")
    return LabelledDocument(doc_id, file, truth, str(entry.get("covers", "")))


def _existing(root: Path, name: Any, where: str) -> Path:
    path = root / str(name)
    if not path.is_file():
        raise DatasetError(f"{where}: file {path} does not exist")
    return path


def _ground_truth(root: Path, spec: Any, where: str) -> list[str]:
    if isinstance(spec, list):
        return [_existing(root, name, where).read_text(encoding="utf-8") for name in spec]
    return _jsonl_pages(_existing(root, spec, where), where)


def _jsonl_pages(path: Path, where: str) -> list[str]:
    """Page texts from JSONL: every page 1..N exactly once, in any line order."""
    texts: dict[int, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            page, text = int(record["page"]), str(record["text"])
        except (ValueError, KeyError, TypeError):
            raise DatasetError(
                f'{where}: {path.name} line {line_no} is not {{"page": n, "text": "..."}}'
            ) from None
        if page in texts:
            raise DatasetError(f"{where}: {path.name} gives page {page} twice")
        texts[page] = text
    if sorted(texts) != list(range(1, len(texts) + 1)):
        raise DatasetError(f"{where}: {path.name} must give pages 1..N, gives {sorted(texts)}")
    return [texts[page] for page in sorted(texts)]
