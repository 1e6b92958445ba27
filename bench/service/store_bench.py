"""A page group's results into the object store, and a document's read back, side by side.

Between a group's decode and its document's next group the worker writes one object per page
(and the next group is queued only after that); when the last group is done it reads every
page back to assemble the document. This times both one call after another (as before) and
``outputs.pages``' batches of ``STORE_CALLS_AT_ONCE``, on a real S3 server (the test stack's:
``bash .ci/services start; eval "$(bash .ci/services env)"``), and prints the ratios.

    python -m bench.service.store_bench --groups 20 --pages 8 --document-pages 100
"""

from __future__ import annotations

import itertools
import os
import statistics
import uuid
from collections.abc import Callable
from types import SimpleNamespace

from bench import harness
from bench.harness import Stopwatch
from ocr_worker.outputs import pages, readback
from uocr_core.contracts import PageResult
from uocr_core.settings import S3Settings
from uocr_core.storage import S3ObjectStore


def _result(page: int) -> PageResult:
    text = f"Line {page} of a scanned contract, clause {page % 17}, signed and dated. " * 30
    return PageResult(page=page, status="succeeded", text=text, markdown=text)


def main() -> None:
    parser = harness.parser(
        __doc__,
        groups=20,
        pages=8,
        help={"groups": "groups written each way", "pages": "pages a group writes"},
    )
    parser.add_argument("--document-pages", type=int, default=100)
    args = parser.parse_args()
    url = os.environ.get("UOCR_TEST_S3_URL") or os.environ.get("UOCR_S3__ENDPOINT_URL")
    if not url:
        raise SystemExit('no S3 server: bash .ci/services start; eval "$(bash .ci/services env)"')
    store = S3ObjectStore(S3Settings(endpoint_url=url, bucket=f"bench-{uuid.uuid4().hex[:8]}"))
    store.ensure_bucket()
    group = [_result(p) for p in range(1, args.pages + 1)]
    written = itertools.count()  # each call's pages under a job of its own

    def one_by_one() -> None:
        job = f"seq-{next(written)}"
        for result in group:
            pages.write_page(store, job, result)

    def batched() -> None:
        pages.write_pages(store, f"par-{next(written)}", group)

    def mean_ms(work: Callable[[], None], calls: int) -> float:
        return Stopwatch.ms_of(work, repeats=calls, warmup=0, statistic=statistics.fmean)

    writes = {
        "one by one": mean_ms(one_by_one, args.groups),
        "batched": mean_ms(batched, args.groups),
    }

    results = [_result(p) for p in range(1, args.document_pages + 1)]
    keys = pages.write_pages(store, "doc", results)
    job = SimpleNamespace(
        pages=[
            SimpleNamespace(page_no=p, result_key=keys[p], status="succeeded", error=None)
            for p in keys
        ]
    )

    def read_one_by_one() -> None:
        for page in job.pages:
            PageResult.model_validate_json(store.get(page.result_key))

    def read_batched() -> None:
        loaded = readback.load_page_results(store, job)  # type: ignore[arg-type]
        assert [r.page for r in loaded] == list(keys)

    reads = {"one by one": mean_ms(read_one_by_one, 3), "batched": mean_ms(read_batched, 3)}
    print(f"a group's {args.pages} page objects written, ms: {writes}")
    print(f"  batched / one by one: {writes['batched'] / writes['one by one']:.2f}")
    print(f"a {args.document_pages}-page document read back, ms: {reads}")
    print(f"  batched / one by one: {reads['batched'] / reads['one by one']:.2f}")
    harness.write({"group_write_ms": writes, "document_read_ms": reads}, args, harness.card())


if __name__ == "__main__":
    main()
