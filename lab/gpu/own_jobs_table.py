"""The own-jobs table from a report's results.json: per workload, its rate at each measured vCPU
count, the share of the workload's own plateau, and its knee (measured, and predicted with its
range). `lab/gpu/own_jobs.sh table` prints it after the campaign; `make examples` writes
`examples/own-jobs/h100/table.txt` with it.

Usage: python3 lab/gpu/own_jobs_table.py RESULTS_JSON
"""

from __future__ import annotations

import argparse
import json
import sys


def workload_lines(w: dict) -> list[str]:
    """One workload's block: its plateau, one line per vCPU count, its knee; then a blank line."""
    knee = w.get("knee") or {}
    rows = [r for r in knee.get("by_decode", []) if r.get("decode") == "cpu"] or knee.get("by_decode", [])
    if not rows:
        return [f"{w['workload']}: no usable point ({w.get('statuses')})", ""]
    row = rows[0]
    plateau = row["ceiling"]
    lines = [f"{w['workload']} ({w.get('unit', '')}): plateau {plateau:,.0f} ({row['ceiling_source']}), "
             f"statuses {w.get('statuses')}",
             f"  {'vCPUs':>5} {'rate':>12} {'of plateau':>10}"]
    lines += [f"  {r['vcpus']:>5} {r['throughput']:>12,.1f} {r['throughput'] / plateau:>10.0%}" for r in row["by_vcpus"]]
    measured = row["knee_vcpus"] if row["knee_vcpus"] is not None else f"beyond {max(row['measured_vcpus'])}"
    rng = knee.get("range") or {}
    predicted = knee.get("predicted_vcpus")
    high = rng.get("high") if rng.get("high") is not None and not rng.get("beyond_measured") else None
    high_text = high if high is not None else f"more than {rng.get('measured_up_to') or max(row['measured_vcpus'])}"
    spread = f" ({rng['low']} to {high_text} at {rng['confidence']:.0%})" if rng.get("low") is not None else ""
    lines += [f"  knee (within {knee.get('tolerance', 0.05):.0%} of the plateau): measured {measured} vCPUs, "
              f"predicted {predicted if predicted is not None else 'n/a'}{spread}", ""]
    return lines


def table(results: dict) -> str:
    return "".join(line + "\n" for w in results["workloads"] for line in workload_lines(w))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a report's results.json")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        sys.stdout.write(table(json.load(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
