"""The real documents: which Debian package, which PDF, which pages, and fetching them.

Never use or tune on the held-out documents (the Debian Reference in every language, the
Developer's Reference, gnuplot's and asymptote's manuals, R's "An Introduction to R", PARI's
tutorial, lshort-zh-cn): they are kept for an independent check. ``HELD_OUT`` guards it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = ROOT / ".ci-state" / "accuracy"  # gitignored: PDFs are fetched, never committed
HELD_OUT = (
    "debian-reference",
    "developers-reference",
    "gnuplot",
    "asymptote",
    "R-intro",
    "pari",
    "lshort",
)


@dataclass(frozen=True)
class SourceDocument:
    """Pages of one PDF shipped in a Debian package. ``pages`` are 0-based page indices."""

    doc_id: str
    package: str
    member: str  # the PDF's path inside the package
    pages: tuple[int, ...]
    covers: str  # what the pages exercise, for the report
    in_ci: bool = True

    @property
    def pdf_path(self) -> Path:
        return STATE_DIR / "pdf" / self.package / Path(self.member).name


R_MANUALS = "usr/share/R/doc/manual"
TEXLIVE_DOC = "usr/share/doc/texlive-doc"

# The CI set: English prose, code, tables, two-column pages and Chinese, 20 pages in all.
CI_DOCUMENTS = (
    SourceDocument(
        "r-admin",
        "r-doc-pdf",
        f"{R_MANUALS}/R-admin.pdf",
        (7, 8, 13),
        "English prose, headings, shell commands",
    ),
    SourceDocument(
        "r-lang",
        "r-doc-pdf",
        f"{R_MANUALS}/R-lang.pdf",
        (15, 16, 17),
        "prose, R code, a two-column operator table",
    ),
    SourceDocument(
        "r-exts-index",
        "r-doc-pdf",
        f"{R_MANUALS}/R-exts.pdf",
        (229, 230),
        "a two-column index with dot leaders",
    ),
    SourceDocument(
        "r-data", "r-doc-pdf", f"{R_MANUALS}/R-data.pdf", (16, 17, 26), "printed data tables, code"
    ),
    SourceDocument(
        "octave-oop",
        "octave-doc",
        "usr/share/doc/octave/octave.pdf",
        (914, 915, 916),
        "a three-column operator table, code, prose",
    ),
    SourceDocument(
        "xecjk",
        "texlive-lang-cjk",
        f"{TEXLIVE_DOC}/xelatex/xecjk/xeCJK.pdf",
        (1, 8, 165),
        "Chinese prose with Latin words, code, a two-column history",
    ),
    SourceDocument(
        "cjkpunct",
        "texlive-lang-cjk",
        f"{TEXLIVE_DOC}/latex/cjkpunct/CJKpunct.pdf",
        (0, 1, 2),
        "Chinese prose, a two-column table, numbered code",
    ),
)

# More pages of other (or the same) non-held-out documents, only for the detection cache, so
# that tuning the reading order does not fit the CI pages alone.
EXTRA_DOCUMENTS = (
    SourceDocument(
        "r-admin-extra",
        "r-doc-pdf",
        f"{R_MANUALS}/R-admin.pdf",
        (20, 30),
        "English prose",
        in_ci=False,
    ),
    SourceDocument(
        "r-ints", "r-doc-pdf", f"{R_MANUALS}/R-ints.pdf", (10, 20, 40), "prose, C code", in_ci=False
    ),
    SourceDocument(
        "r-faq", "r-doc-pdf", f"{R_MANUALS}/R-FAQ.pdf", (10, 20), "prose, lists", in_ci=False
    ),
    SourceDocument(
        "r-exts", "r-doc-pdf", f"{R_MANUALS}/R-exts.pdf", (20, 60, 100), "prose, code", in_ci=False
    ),
    SourceDocument(
        "r-lang-extra",
        "r-doc-pdf",
        f"{R_MANUALS}/R-lang.pdf",
        (30, 40, 66),
        "prose, code, index",
        in_ci=False,
    ),
    SourceDocument(
        "octave-extra",
        "octave-doc",
        "usr/share/doc/octave/octave.pdf",
        (50, 200, 1150),
        "prose, code, index",
        in_ci=False,
    ),
    SourceDocument(
        "liboctave",
        "octave-doc",
        "usr/share/doc/octave/liboctave.pdf",
        (10, 20),
        "prose, C++ code",
        in_ci=False,
    ),
    SourceDocument(
        "xecjk-extra",
        "texlive-lang-cjk",
        f"{TEXLIVE_DOC}/xelatex/xecjk/xeCJK.pdf",
        (3, 5, 9, 12, 40, 168),
        "Chinese prose, code, code index",
        in_ci=False,
    ),
    SourceDocument(
        "cjkpunct-extra",
        "texlive-lang-cjk",
        f"{TEXLIVE_DOC}/latex/cjkpunct/CJKpunct.pdf",
        (5,),
        "code",
        in_ci=False,
    ),
)


# Table pages: option tables whose last column wraps, symbol tables set side by side or in column
# pairs, Chinese tables. Each page's text layer lists the cells row by row (checked), so the
# suite's scoring applies as it is. All but one are in the CI suite (CI_TABLES): the Greek table
# in four column pairs reads like two page columns of an index to the layout and is read half
# after half (docs/accuracy.md, "Tables"), so it stays a bench page until that is told apart.
TABLE_DOCUMENTS = (
    SourceDocument(
        "hyperref-options",
        "texlive-latex-base-doc",
        f"{TEXLIVE_DOC}/latex/hyperref/hyperref-doc.pdf",
        (16, 20),
        "option | type | default | description, descriptions wrapping over 2-5 lines",
    ),
    SourceDocument(
        "unicode-math-dims",
        "texlive-latex-recommended-doc",
        f"{TEXLIVE_DOC}/latex/unicode-math/unicode-math.pdf",
        (26,),
        "a ruled three-column table, descriptions and names wrapping",
    ),
    SourceDocument(
        "fntguide-symbols",
        "texlive-latex-base-doc",
        f"{TEXLIVE_DOC}/latex/base/fntguide.pdf",
        (34,),
        "two side-by-side groups of command | glyph | code, ~54 rows each",
    ),
    SourceDocument(
        "latex-notes-greek",
        "texlive-lang-chinese",
        f"{TEXLIVE_DOC}/generic/latex-notes-zh-cn/latex-notes-zh-cn.pdf",
        (33,),
        "Chinese prose and code, then a symbol table in four column pairs",
        in_ci=False,
    ),
    SourceDocument(
        "ctex-tables",
        "texlive-lang-chinese",
        f"{TEXLIVE_DOC}/latex/ctex/ctex.pdf",
        (8, 27),
        "Chinese tables: font sizes (8 columns, a two-row header), size names",
    ),
    SourceDocument(
        "qyxf-colours",
        "texlive-lang-chinese",
        f"{TEXLIVE_DOC}/latex/qyxf-book/qyxf-book-doc.pdf",
        (9,),
        "a Chinese four-column table whose last column wraps and spans rows",
    ),
)


CI_TABLES = tuple(doc for doc in TABLE_DOCUMENTS if doc.in_ci)


def fetch(documents: tuple[SourceDocument, ...]) -> None:
    """Download each package once, keep only the PDFs used (idempotent: a fetched PDF is
    skipped). Packages are unpacked into a folder, never installed."""
    for package in sorted({doc.package for doc in documents}):
        wanted = [doc for doc in documents if doc.package == package]
        if all(doc.pdf_path.is_file() for doc in wanted):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            unpacked = _download_and_unpack(package, Path(tmp))
            for doc in wanted:
                doc.pdf_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(unpacked / doc.member, doc.pdf_path)


# Each package pinned: its version and the .deb's sha256 (as Debian 12's archive lists them,
# `apt-cache show PACKAGE`). Another version would move the pages under the same numbers, so a
# package that is missing or changed fails the fetch, naming it, rather than shift the corpus.
PINNED = {
    "r-doc-pdf": (
        "4.2.2.20221110-2",
        "beb104ad5818d261f280a868294645ca31d7c63365f2c9a55aa3ca9aad5aa71d",
    ),
    "octave-doc": (
        "7.3.0-2",
        "b27897cc7e3d688daa5cb8f8d1ea47077f3fbd205ce32e22522200ff0c1eadd5",
    ),
    "texlive-lang-cjk": (
        "2022.20230122-1",
        "5adfa9d8aa926886bceb643f2fc28618610536b64cecad2af0c15c5f992d7d8a",
    ),
    "texlive-latex-base-doc": (
        "2022.20230122-3",
        "122dbbe00bd22f872b1837eb86bd76fbac6ec84dd4f5f0c76cc9c18484485848",
    ),
    "texlive-latex-recommended-doc": (
        "2022.20230122-3",
        "8bea1f81bf50354fa4f3046c2dbb82efba9b8520aca0b2ab12eed18554a66c11",
    ),
    "texlive-lang-chinese": (
        "2022.20230122-1",
        "9cfa07bd44e7b9098e26f0ecac1b5ad210d2249d474c8074d53de92d650b0ec0",
    ),
}


class CorpusChanged(RuntimeError):
    """A pinned package cannot be had as pinned."""


def _download_and_unpack(package: str, tmp: Path) -> Path:
    version, _ = PINNED[package]
    # As root into a private folder, which apt's sandbox user could not write to.
    sandbox = ["-o", "APT::Sandbox::User=root"]
    download = ["apt-get", "download", "-qq", *sandbox, f"{package}={version}"]
    if subprocess.run(download, cwd=tmp).returncode != 0:
        # A fresh machine's package lists may be missing or stale.
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        if subprocess.run(download, cwd=tmp).returncode != 0:
            raise CorpusChanged(
                f"{package} {version} cannot be downloaded (the archive has moved on?): the "
                "accuracy corpus is pinned to it; pin the new version in bench/accuracy/"
                "corpus.py only after checking its pages"
            )
    (deb,) = tmp.glob(f"{package}_*.deb")
    verify_pinned(package, deb)
    subprocess.run(["dpkg", "-x", str(deb), str(tmp / "x")], check=True)
    return tmp / "x"


def verify_pinned(package: str, deb: Path) -> None:
    version, expected = PINNED[package]
    got = hashlib.sha256(deb.read_bytes()).hexdigest()
    if got != expected:
        raise CorpusChanged(
            f"{deb.name}: sha256 {got}, but {package} {version} is pinned at {expected}: the "
            "package changed under the same version; the corpus is not fetched"
        )


def check_not_held_out(documents: tuple[SourceDocument, ...]) -> None:
    for doc in documents:
        if any(name.lower() in doc.member.lower() for name in HELD_OUT):
            raise ValueError(f"{doc.member} is held out for an independent check")


check_not_held_out(CI_DOCUMENTS + EXTRA_DOCUMENTS + TABLE_DOCUMENTS)

if __name__ == "__main__":  # python -m bench.accuracy.corpus [--extras] [--tables]
    fetch(
        CI_DOCUMENTS
        + CI_TABLES
        + (EXTRA_DOCUMENTS if "--extras" in sys.argv else ())
        + (TABLE_DOCUMENTS if "--tables" in sys.argv else ())
    )
