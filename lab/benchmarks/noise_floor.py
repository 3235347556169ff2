"""A host's noise floor: how far the sub-window rates of its points spread, per host and workload.

A point's spread is (max - min) / median of the rates of its window's sub-windows
(workloads/stats.py). A point whose spread exceeds the noisy threshold (workloads.stats.NOISY_SPREAD
unless --threshold says) is flagged noisy; a window that came out short is counted apart (its rates
may agree to the percent: a disk-throttled point's rounds come slowly). Per store,
host and workload this prints the usable points, their median measured steps, the median, 90th and
95th percentile and largest spread, the short windows, and how many points the threshold flags.
The threshold is set above what an idle host gives (docs/PERFORMANCE.md, "The noisy threshold").

Stores are opened read-only and left as they were (no -wal or -shm file beside them); a store of an
older schema is refused (any sizer command migrates it). Read finished stores, not one a sweep is
writing.

Usage: python lab/benchmarks/noise_floor.py STORE [STORE ...] [--threshold 0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.catalog import normalize_gpu  # noqa: E402
from workloads.stats import NOISY_SPREAD, percentile  # noqa: E402

USABLE = ("ok", "noisy")
SCHEMA = "2"


def host_label(info: dict[str, Any]) -> str:
    """The host as the table names it: its GPU (or none) and its vCPUs."""
    gpus = info.get("gpus") or []
    gpu = f"{len(gpus)}x {normalize_gpu(gpus[0])}" if gpus else "no GPU"
    return f"{gpu}, {info.get('threads', '?')} vCPUs"


def read_points(path: Path) -> list[dict[str, Any]]:
    """The usable points of a store: host, workload, spread, measured steps, whether the window was short."""
    if not path.is_file():
        raise SystemExit(f"noise_floor.py: no store at {path}")
    # Immutable: no lock and no -wal or -shm file beside a store that may be committed (a WAL
    # store opened read-only leaves both); a store being written to meanwhile is not for this.
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro&immutable=1", uri=True)
    try:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or version[0] != SCHEMA:
            raise SystemExit(f"noise_floor.py: {path} has store schema {version and version[0]}, not {SCHEMA}: "
                             "open it once with sizer (sizer fit --store ...) to migrate it")
        rows = conn.execute(
            "SELECT h.info, p.workload, p.spread, p.result, s.count FROM points p"
            " JOIN sweeps w ON w.id = p.sweep_id JOIN hosts h ON h.id = w.host_id"
            " LEFT JOIN steps s ON s.point_id = p.id"
            f" WHERE p.status IN ({', '.join('?' * len(USABLE))}) ORDER BY p.id", USABLE).fetchall()
    finally:
        conn.close()
    points = []
    for info, workload, spread, result, count in rows:
        extra = json.loads(result).get("extra") or {}
        counters = json.loads(result).get("counters") or {}
        points.append({"host": host_label(json.loads(info)), "workload": workload, "spread": float(spread),
                       "steps": int(count or 0) - int(counters.get("warmup_steps") or 0),
                       "short": bool(extra.get("window_short"))})
    return points


def flagged(point: dict[str, Any], threshold: float) -> bool:
    """Noisy: its windows spread past the threshold (a short window is counted apart, `short`)."""
    return point["spread"] > threshold


def summarize(points: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """One row per host and workload, then one per host over all its workloads ("all")."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        groups[(p["host"], p["workload"])].append(p)
        groups[(p["host"], "all")].append(p)
    rows = []
    for (host, workload), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        spreads = [p["spread"] for p in group]
        rows.append({
            "host": host, "workload": workload, "points": len(group),
            "median_steps": statistics.median(p["steps"] for p in group),
            "median": statistics.median(spreads), "p90": percentile(spreads, 90), "p95": percentile(spreads, 95),
            "max": max(spreads), "short": sum(p["short"] for p in group),
            "flagged": sum(flagged(p, threshold) for p in group),
        })
    return rows


def render(rows: list[dict[str, Any]], threshold: float) -> str:
    head = (f"{'host':<18} {'workload':<24} {'points':>6} {'steps':>6} {'median':>7} {'p90':>7} {'p95':>7} "
            f"{'max':>7} {'short':>5} {'flagged':>8}")
    lines = [f"spread of sub-window rates; flagged: over {threshold:.0%}; short: windows that came out short", head,
             "-" * len(head)]
    for r in rows:
        lines.append(f"{r['host']:<18} {r['workload']:<24} {r['points']:>6} {r['median_steps']:>6.0f} "
                     f"{r['median']:>7.1%} {r['p90']:>7.1%} {r['p95']:>7.1%} {r['max']:>7.1%} {r['short']:>5} "
                     f"{r['flagged']:>4} ({r['flagged'] / r['points']:.0%})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="noise_floor.py", description=__doc__.split("\n\n")[0],
                                     usage="python lab/benchmarks/noise_floor.py STORE [STORE ...] [--threshold 0.2] [--json]")
    parser.add_argument("stores", nargs="+", type=Path, metavar="STORE")
    parser.add_argument("--threshold", type=float, default=NOISY_SPREAD,
                        help=f"the spread above which a point is noisy (default {NOISY_SPREAD:g})")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    points = [p for path in args.stores for p in read_points(path)]
    rows = summarize(points, args.threshold)
    print(json.dumps(rows, indent=2) if args.json else render(rows, args.threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
