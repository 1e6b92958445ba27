"""``uocr eval``, the accuracy gate, on the CPU engine and the CI subset of the regression set
(bench/accuracy/eval_set.py: real manuals, scanned; 5 pages).

Two versions that are the same CPU engine pass. No per-version setting changes what the CPU
engine reads (a version's options are the GPU engine's), so the failing case is a candidate that
really reads worse: the same engine on pages shrunk to a fifth (40 dpi, where small print
blurs), through the same pipeline, measured, compared and reported by the command's own
functions.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.accuracy.eval_set import build, documents
from ocr_worker.accuracy.dataset import Dataset, load_dataset
from ocr_worker.accuracy.evaluation import evaluate_engine, evaluate_version
from ocr_worker.accuracy.gate import compare
from ocr_worker.engines.base import OcrEngine, PageGroupInput
from ocr_worker.engines.rapidocr import RapidOcrEngine
from tests.cli.conftest import uocr
from uocr_cli.evaluate import finish, print_table
from uocr_core.contracts import PageResult
from uocr_core.settings import Settings

pytestmark = pytest.mark.accuracy

# Two versions of the CPU engine; the candidate's GPU-engine override is not read by it.
VERSIONS = {
    "UOCR_MODELS__SERVE": "stable",
    "UOCR_MODELS__VERSIONS": json.dumps(
        {
            "stable": {"engine": "rapidocr"},
            "candidate": {"engine": "rapidocr", "unlimited_ocr": {"max_tokens_per_page": 2000}},
        }
    ),
}


@pytest.fixture(scope="module")
def ci_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [str(doc.pdf_path) for doc in documents(ci=True) if not doc.pdf_path.is_file()]
    if missing:
        message = f"documents not fetched (bash .ci/setup fetches them): {missing}"
        if os.environ.get("UOCR_REQUIRE_SERVICES"):  # CI: never skip silently
            pytest.fail(message)
        pytest.skip(message)
    return build(tmp_path_factory.mktemp("eval-set"), ci=True).parent


def test_the_same_cpu_engine_under_two_versions_passes_the_gate(ci_set: Path) -> None:
    done = uocr(
        "eval",
        str(ci_set),
        "--versions",
        "stable",
        "candidate",
        "--json",
        env=VERSIONS,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "gate passed: candidate reads no worse than stable" in done.stderr
    report = json.loads(done.stdout)
    a, b = report["versions"]["A"], report["versions"]["B"]
    assert (a["version"], b["version"], a["engines"], b["engines"]) == (
        "stable",
        "candidate",
        ["rapidocr"],
        ["rapidocr"],
    )
    assert [d["id"] for d in a["documents"]] == [
        "r-admin-chapter",
        "octave-profiler-table",
        "r-data-xref",
    ]
    for doc_a, doc_b in zip(a["documents"], b["documents"], strict=True):
        assert doc_a["pages_returned"] == doc_b["pages_returned"] == doc_a["pages_expected"]
        assert doc_a["order_ok"] and doc_b["order_ok"]
        assert doc_a["page_cer"] == doc_b["page_cer"], doc_a["id"]  # same pixels, same model
    assert a["cer"] < 0.05, "the set must be readable for the comparison to mean anything"
    assert a["pages_per_second"] > 0 and b["pages_per_second"] > 0


SHRINK = 5  # 200 dpi to 40: the table page's CER goes from about 8% to about 19%


class ShrunkPages(OcrEngine):
    """The CPU engine reading every page at a fifth of its size: a candidate that is worse."""

    def __init__(self, inner: OcrEngine) -> None:
        self.inner, self.name = inner, inner.name

    def run_group(self, group: PageGroupInput) -> list[PageResult]:
        pages = [replace(page, pixels=_shrunk(page.pixels)) for page in group.pages]
        return self.inner.run_group(replace(group, pages=pages))


def _shrunk(pixels: np.ndarray) -> np.ndarray:
    image = Image.fromarray(pixels)
    size = (image.width // SHRINK, image.height // SHRINK)
    return np.asarray(image.resize(size, Image.Resampling.BOX))


def test_a_candidate_that_reads_worse_fails_naming_the_document(
    ci_set: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = load_dataset(ci_set)
    table_only = Dataset(full.name, full.definition, [full.documents[1]])  # one page: fast
    settings = Settings()
    stable = evaluate_version(table_only, settings, "default")
    worse = evaluate_engine(table_only, settings, ShrunkPages(RapidOcrEngine()), "shrunk")
    assert worse.cer > stable.cer + 0.05, (stable.cer, worse.cer)  # a real, large regression

    verdict = compare(stable, worse, margin_points=0.5)
    print_table(table_only.name, stable, worse, 0.5)
    with pytest.raises(SystemExit) as exited:
        finish(verdict, stable, worse)
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert err.startswith("gate failed: shrunk reads worse than default on octave-profiler-table")
    assert err.count("\n") == 1  # one line
    assert "octave-profiler-table" in out and f"{worse.cer:.2%}" in out
