"""The scale bench's report: the sizes side by side, the statements whose time grew with the
table sizes (with their plans), and the plans that read a big table whole."""

from __future__ import annotations

import re
import statistics
from typing import Any


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100)[q - 1]


def plan_nodes(node: dict[str, Any], depth: int = 0) -> Any:
    what = node["Node Type"] + (f" on {node['Relation Name']}" if "Relation Name" in node else "")
    what += f" using {node['Index Name']}" if "Index Name" in node else ""
    what += f" rows={node.get('Actual Rows', '?')}"
    what += (
        f" removed={node['Rows Removed by Filter']}" if node.get("Rows Removed by Filter") else ""
    )
    yield "  " * depth + what if depth else what
    for child in node.get("Plans", []):
        yield from plan_nodes(child, depth + 1)


def normalise(query: str) -> str:
    """A statement's shape: parameters and constants as ?, whitespace collapsed."""
    shape = re.sub(r"\$\d+|'[^']*'|\b\d+\b", "?", query)
    return re.sub(r"\s+", " ", shape).strip().lower()


# -- the report ----------------------------------------------------------------------------------


def table(results: list[dict[str, Any]]) -> list[tuple[str, list[float]]]:
    """(name, a value a size) for each line of the side-by-side table."""
    kinds = sorted({k for r in results for k in r["cpu_ms_per_page"]})
    lines = [
        ("fill seconds", [r["fill_seconds"] for r in results]),
        ("db size after fill (MB)", [r["fill_db_bytes"] / 2**20 for r in results]),
        ("pages in the workload", [r["pages"] for r in results]),
        *(
            (f"cpu ms/page: {k}", [r["cpu_ms_per_page"].get(k, 0.0) for r in results])
            for k in kinds
        ),
        ("cpu ms/page: all of the above", [sum(r["cpu_ms_per_page"].values()) for r in results]),
        # Rendering is the OCR host's work (the engine's input), not the control plane's.
        ("cpu ms/page: all but render", [_without_render(r) for r in results]),
        ("cpu ms/page: bench client", [r["bench_client_cpu_ms_per_page"] for r in results]),
        *(
            (f"db {k}/page", [r["db_per_page"][k] for r in results])
            for k in ("inserted", "updated", "deleted", "commits", "wal_bytes", "db_bytes")
        ),
        ("redis used_memory_peak (MB)", [r["redis_used_memory_peak"] / 2**20 for r in results]),
        ("redis sampled peak (MB)", [r["redis_sampled_peak"] / 2**20 for r in results]),
        *(
            (f"s3 {m} requests/page", [r["s3_requests_per_page"].get(m, 0.0) for r in results])
            for m in sorted({m for r in results for m in r["s3_requests_per_page"]})
        ),
        ("s3 bytes stored/page", [r["s3_bytes_stored_per_page"] for r in results]),
        ("batch accepted (s)", [r["accept_seconds"] for r in results]),
        ("submit to done (s)", [r["submit_to_done_seconds"] for r in results]),
        (
            "interactive completion p50 (s)",
            [statistics.median(r["interactive_completion_s"] or [0]) for r in results],
        ),
        ("status p50 (ms)", [r["status_ms"]["p50"] for r in results]),
        ("status p95 (ms)", [r["status_ms"]["p95"] for r in results]),
        ("list p50 (ms)", [r["list_ms"]["p50"] for r in results]),
        ("list p95 (ms)", [r["list_ms"]["p95"] for r in results]),
        ("purge_expired_results once (ms)", [r["plans"]["purge_expired_ms"] for r in results]),
        ("sweep_orphan_objects once (ms)", [r["plans"]["sweep_orphans_ms"] for r in results]),
    ]
    return lines


def _without_render(result: dict[str, Any]) -> float:
    cpu = result["cpu_ms_per_page"]
    return sum(cpu.values()) - cpu.get("ocr worker: render", 0.0)


def _scanned(node: str) -> int:
    """Rows a plan node read: those it returned and those its filter removed."""
    return sum(int(n) for n in re.findall(r"(?:rows|removed)=(\d+)", node))


def growing(results: list[dict[str, Any]], factor: float, floor_ms: float) -> list[dict[str, Any]]:
    """Statements whose mean time at the largest size is ``factor`` times the smallest's (and
    at least ``floor_ms``): their mean at each size, and the largest size's plan."""
    means = [{normalise(s["query"]): s["mean_ms"] for s in r["statements"]} for r in results]
    large = results[-1]
    grown = []
    for s in large["statements"]:
        key = normalise(s["query"])
        first = means[0].get(key)
        if first and s["mean_ms"] >= floor_ms and s["mean_ms"] >= factor * first:
            plan = large["plans"]["by_query"].get(key, {})
            each = [m.get(key, float("nan")) for m in means]
            grown.append(
                {
                    "query": s["query"],
                    "calls": s["calls"],
                    "mean_ms": each,
                    "plan": plan.get("nodes"),
                }
            )
    return sorted(grown, key=lambda g: g["mean_ms"][0] - g["mean_ms"][-1])


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    print(f"{'rows of finished pages':<36}" + "".join(f"{r['rows']:>14,}" for r in results))
    for name, values in table(results):
        print(f"{name:<36}" + "".join(f"{v:>14.3f}" for v in values))
    grown = growing(results, factor=1.5, floor_ms=0.1)
    print(
        f"\nstatements whose mean grew >= 1.5x ({results[0]['rows']:,} -> "
        f"{results[-1]['rows']:,} rows):"
    )
    for g in grown:
        means = " -> ".join(f"{m:.3f}" for m in g["mean_ms"])
        print(f"  {means} ms x{g['calls']}: {g['query'][:300]}")
        for node in g["plan"] or ["(no plan captured)"]:
            print(f"      {node}")
    plans = results[-1]["plans"]["by_query"].items()
    scans = {k: p for k, p in plans if any(_scanned(n) >= 1000 for n in p["seq_scans"])}
    print(f"\nplans with a Seq Scan reading >= 1,000 rows at {results[-1]['rows']:,} rows:")
    for plan in scans.values():
        print(f"  {plan['query'][:300]}")
        for node in plan["nodes"]:
            print(f"      {node}")
    print(f"\nslowest statements by mean at {results[-1]['rows']:,} rows:")
    for s in sorted(results[-1]["statements"], key=lambda s: -s["mean_ms"])[:12]:
        print(f"  {s['mean_ms']:8.3f} ms x{s['calls']:<6} {s['query'][:200]}")
    return {
        "table": {name: values for name, values in table(results)},
        "growing": grown,
        "seq_scans": list(scans.values()),
    }
