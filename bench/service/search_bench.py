"""Search at scale: GET /v1/search's latency over 10^4 and 10^6 indexed pages, side by side.

Each size is a database of its own on the scale bench's Postgres (bench/service/scale_cluster),
filled as the scale bench fills it (tests/scale_fill.py: two months of finished jobs over eight
tenants, the largest holding 40%), then every kept page of a succeeded job indexed as the record
stage indexes it: 36 consecutive lines of real text (every page of the accuracy corpus's real
Debian manuals, English and Chinese: bench/accuracy/corpus.py) and a first line naming the
document ("Folio 3f2a9c1d, page 12"), through ``to_tsvector`` with the service's configuration.

Then the API (in process, through its routes, auth and serialisation) answers the largest
tenant's queries of eight kinds, each asked ``--queries`` times with different words: a
document's reference (a handful of pages), a word and a phrase from the manuals, two words,
Chinese (2 to 4 characters, and one alone), a word on every page (more matches than
``search.rank_candidates``) and a word found nowhere. It prints p50/p95/max a kind and over
all, for each size, and the ratio of the largest size's p95 to the smallest's; and what
indexing a page costs the record stage at each size.

Needs the services (`eval "$(bash .ci/services env)"`) and the corpus (`bash .ci/setup`):
    .venv/bin/python -m bench.service.search_bench --pages 10000 1000000
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import psycopg
import pymupdf
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from bench import harness
from bench.accuracy.corpus import CI_DOCUMENTS, EXTRA_DOCUMENTS, TABLE_DOCUMENTS
from bench.service.scale_cluster import Cluster
from ocr_api.main import create_app
from tests import scale_fill
from tests.conftest import TEST_SETTINGS_ENV, create_database, drop_database
from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.search.index import PageLines, add_pages
from uocr_core.search.words import CJK_RUN, indexed_text
from uocr_core.settings import load_settings
from uocr_core.tenants import create_key

LINES_A_PAGE = 36
TENANTS = ("archive", "app", "records", "legal", "claims", "hr", "library", "finance")
# Kept pages of succeeded jobs are ~40% of the rows two months of history hold (30-day retention).
ROWS_PER_INDEXED_PAGE = 2.55


def corpus_lines() -> list[str]:
    """Every line of every page of the corpus's manuals, in order."""
    lines: list[str] = []
    paths = {doc.pdf_path for doc in CI_DOCUMENTS + EXTRA_DOCUMENTS + TABLE_DOCUMENTS}
    for path in sorted(p for p in paths if p.is_file()):
        with pymupdf.open(path) as pdf:
            for page in pdf:
                text = page.get_text().replace("\x00", "")  # as the index drops NUL
                lines += [" ".join(t.split()) for t in text.splitlines() if t.strip()]
    if len(lines) < 10 * LINES_A_PAGE:
        raise SystemExit("the accuracy corpus is not fetched: bash .ci/setup")
    return lines


def index_pages(url: str, lines: list[str], language: str) -> int:
    """Index every kept page of a succeeded job as the record stage would; returns how many."""
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        conn.execute("CREATE UNLOGGED TABLE corpus (n int PRIMARY KEY, line text, indexed text)")
        with conn.cursor().copy("COPY corpus (n, line, indexed) FROM STDIN") as copy:
            for n, line in enumerate(lines):
                copy.write_row((n, line, indexed_text(line)))
        conn.execute("DROP INDEX ix_page_texts_search")
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(_INDEX_PAGES, {"language": language, "span": len(lines) - LINES_A_PAGE})
        conn.execute(
            "CREATE INDEX ix_page_texts_search ON page_texts USING gin (tenant_id, document)"
        )
        conn.execute("DROP TABLE corpus")
        count = conn.execute("SELECT count(*) FROM page_texts").fetchone()
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) page_texts")
    return int(count[0]) if count else 0


_INDEX_PAGES = """
INSERT INTO page_texts (job_id, page_no, tenant_id, document, lines, width, height)
SELECT p.job_id, p.page_no, j.tenant_id,
       to_tsvector(CAST(%(language)s AS regconfig), f.ref || E'\\n' || t.body),
       (jsonb_build_array(jsonb_build_array(f.ref, 150, 40, 1550, 80)) || t.lines)::json,
       1700, 2200
FROM pages p JOIN jobs j ON j.id = p.job_id
CROSS JOIN LATERAL (
    SELECT abs(hashtext(p.job_id || ':' || p.page_no)) %% %(span)s AS k,
           'Folio ' || left(p.job_id, 8) || ', page ' || p.page_no AS ref
) f
CROSS JOIN LATERAL (
    SELECT string_agg(c.indexed, E'\\n' ORDER BY c.n) AS body,
           jsonb_agg(jsonb_build_array(c.line, 150, 100 + 50 * (c.n - f.k), 1550,
                                       140 + 50 * (c.n - f.k)) ORDER BY c.n) AS lines
    FROM corpus c WHERE c.n >= f.k AND c.n < f.k + 36
) t
WHERE p.status = 'succeeded' AND j.deleted_at IS NULL AND j.results_deleted_at IS NULL
"""


def queries(
    url: str, tenant_id: str, lines: list[str], count: int, seed: int
) -> dict[str, list[str]]:
    """``count`` queries of each kind for the tenant, drawn from what its pages hold."""
    rng = random.Random(seed)
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        jobs = [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT job_id FROM page_texts WHERE tenant_id = %s LIMIT 5000",
                [tenant_id],
            )
        ]
    words = [w for line in lines for w in line.split() if w.isalpha() and len(w) >= 6]
    chinese = [run for line in lines for run in CJK_RUN.findall(line) if len(run) >= 4]
    phrases = [  # three words in a row, one of them long: not all stop words ("those that do")
        " ".join(ws[i : i + 3])
        for ws in (line.split() for line in lines)
        for i in range(len(ws) - 2)
        if all(w.isalpha() for w in ws[i : i + 3]) and max(map(len, ws[i : i + 3])) >= 6
    ]

    def some(make: Iterator[str]) -> list[str]:
        return [next(make) for _ in range(count)]

    def draw(pool: list[str]) -> Iterator[str]:
        while True:
            yield rng.choice(pool)

    kinds = {
        "reference": some(f'"folio {job[:8]}"' for job in draw(jobs)),
        "word": some(draw(words)),
        "phrase": some(f'"{p}"' for p in draw(phrases)),
        "two words": some(f"{a} {b}" for a, b in zip(draw(words), draw(words), strict=False)),
        "every page": ["folio"] * count,
        "nowhere": some(f"zq{rng.randrange(10**8)}x" for _ in iter(int, 1)),
    }
    if chinese:
        kinds["chinese"] = some(run[: rng.choice((2, 3, 4))] for run in draw(chinese))
        kinds["one character"] = some(rng.choice(run) for run in draw(chinese))
    return kinds


def measure(client: TestClient, key: str, kinds: dict[str, list[str]]) -> dict[str, Any]:
    """Each query once (after a round to warm the caches), its time through the API."""
    auth = {"Authorization": f"Bearer {key}"}
    for asked in kinds.values():
        client.get("/v1/search", params={"q": asked[0]}, headers=auth).raise_for_status()
    figures: dict[str, Any] = {}
    every: list[float] = []
    for kind, asked in kinds.items():
        times, hits = [], []
        for q in asked:
            start = time.perf_counter()
            answer = client.get("/v1/search", params={"q": q}, headers=auth)
            times.append((time.perf_counter() - start) * 1000)
            answer.raise_for_status()
            hits.append(len(answer.json()["hits"]))
        every += times
        figures[kind] = {**_spread(times), "hits_mean": statistics.mean(hits)}
    figures["all"] = _spread(every)
    return figures


def _spread(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 1),
        "max_ms": round(ordered[-1], 1),
    }


def indexing_cost(
    sessions: sessionmaker[Session], url: str, lines: list[str], language: str, groups: int = 100
) -> dict[str, float]:
    """What the record stage pays to index a page: ``groups`` groups of 8 pages of 36 real
    lines, each written as the record stage writes them (``search.index.add_pages``, one
    transaction a group), into the filled index; Postgres's CPU from its backend's own
    counters, and the wall time."""
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        row = conn.execute("SELECT id, tenant_id FROM jobs LIMIT 1").fetchone()
    assert row is not None
    job_id, tenant_id = row
    rng = random.Random(5)
    with sessions() as session:
        backend = psutil.Process(int(session.scalar(text("SELECT pg_backend_pid()")) or 0))
        cpu_before, start = sum(backend.cpu_times()[:2]), time.perf_counter()
        for group in range(groups):
            batch = []
            for n in range(8):
                k = rng.randrange(len(lines) - LINES_A_PAGE)
                placed = [
                    (line, (150.0, 100.0 + 50 * i, 1550.0, 140.0 + 50 * i))
                    for i, line in enumerate(lines[k : k + LINES_A_PAGE])
                ]
                batch.append(PageLines(1_000_000 + group * 8 + n, placed, 1700, 2200))
            add_pages(session, tenant_id=tenant_id, job_id=job_id, pages=batch, language=language)
            session.commit()
        wall = time.perf_counter() - start
        cpu = sum(backend.cpu_times()[:2]) - cpu_before
        session.execute(text("DELETE FROM page_texts WHERE page_no >= 1000000"))
        session.commit()
    pages = groups * 8
    return {"postgres_cpu_ms_a_page": round(cpu * 1000 / pages, 2),
            "wall_ms_a_page": round(wall * 1000 / pages, 2)}  # fmt: skip


def run_size(pages: int, args: Any, cluster: Cluster, lines: list[str]) -> dict[str, Any]:
    tag = f"search{pages}_{uuid.uuid4().hex[:6]}"
    url = create_database(cluster.admin_url, tag)
    os.environ.update(
        {
            **TEST_SETTINGS_ENV,
            "UOCR_DATABASE__URL": url,
            "UOCR_REDIS__URL": os.environ["UOCR_TEST_REDIS_URL"] + "/14",
            "UOCR_S3__ENDPOINT_URL": os.environ["UOCR_TEST_S3_URL"],
            "UOCR_S3__BUCKET": "uocr-" + tag.replace("_", "-"),
        }
    )
    settings = load_settings()
    engine = make_engine(settings.database)
    sessions = make_session_factory(engine)
    try:
        with transaction(sessions) as session:
            keys = [create_key(session, tenant_name=name) for name in TENANTS]
        with harness.Stopwatch() as filling:
            rows = int(pages * ROWS_PER_INDEXED_PAGE)
            scale_fill.fill(url, rows, [k.tenant_id for k in keys])
            indexed = index_pages(url, lines, settings.search.language)
        size = cluster.sql(
            "SELECT pg_total_relation_size('page_texts'), pg_relation_size('ix_page_texts_search')",
            db=f"uocr_{tag}",
        )[0]
        print(f"pages={pages}: {indexed} indexed in {filling.seconds:.0f} s", flush=True)
        cost = indexing_cost(sessions, url, lines, settings.search.language)
        print(f"pages={pages}: indexing a page {cost}", flush=True)
        kinds = queries(url, keys[0].tenant_id, lines, args.queries, seed=pages)
        with TestClient(create_app(settings)) as client:
            figures = measure(client, keys[0].api_key, kinds)
        line = ", ".join(f"{k} {v['p50_ms']}/{v['p95_ms']}" for k, v in figures.items())
        print(f"pages={pages}: p50/p95 ms: {line}", flush=True)
        return {
            "indexed_pages": indexed,
            "page_rows": rows,
            "fill_seconds": round(filling.seconds),
            "table_bytes": size[0],
            "index_bytes": size[1],
            "indexing": cost,
            "queries": figures,
        }
    finally:
        engine.dispose()
        drop_database(cluster.admin_url, tag)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pages", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=20, help="queries of each kind")
    args = parser.parse_args()
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line a query otherwise
    lines = corpus_lines()
    print(f"{len(lines)} lines of real text", flush=True)
    cluster = Cluster().start()
    try:
        sizes = {pages: run_size(pages, args, cluster, lines) for pages in args.pages}
    finally:
        cluster.stop()
    first, last = sizes[args.pages[0]], sizes[args.pages[-1]]
    ratio = last["queries"]["all"]["p95_ms"] / max(first["queries"]["all"]["p95_ms"], 0.1)
    print(f"p95 over all queries, {args.pages[-1]:,} vs {args.pages[0]:,} pages: {ratio:.2f}x")
    cpu, wall = "postgres_cpu_ms_a_page", "wall_ms_a_page"
    a, b = first["indexing"], last["indexing"]
    print(
        f"  indexing a page: Postgres CPU {a[cpu]} -> {b[cpu]} ms, wall {a[wall]} -> {b[wall]} ms"
    )
    for kind in first["queries"]:
        a, b = first["queries"][kind], last["queries"][kind]
        print(f"  {kind:12} p95 {a['p95_ms']:7.1f} -> {b['p95_ms']:7.1f} ms")
    results = {"cores": os.cpu_count(), "p95_ratio": round(ratio, 2), "sizes": sizes}
    path = harness.write(results, args, harness.card())
    print(f"written to {path}")


if __name__ == "__main__":
    main()
