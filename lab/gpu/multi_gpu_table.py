"""The scaling table of a sweep over GPU counts (lab/gpu/multi_gpu.sh), from its results.json: one
row per shape, GPUs and vCPUs per GPU, the measured rate and per-GPU rate, the efficiency against one
GPU at the same vCPUs per GPU, the per-GPU-share prediction (the one-GPU model at the share, times
the GPUs) and the measurement's gap to it. Writes the rows as JSON beside it with --json-out.

usage: python3 lab/gpu/multi_gpu_table.py RESULTS_JSON [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def table_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One-GPU real-input points (the model's fitted value as their prediction) and every multi-GPU
    shape of the results' scaling tables, per workload, by disk, RAM, vCPUs per GPU and GPUs."""
    rows = []
    for wl in results.get("workloads", []):
        for p in wl.get("points", []):
            if p.get("input") == "synthetic" or not p.get("usable"):
                continue
            measured, predicted = p["measured"], p.get("predicted")
            rows.append({"workload": wl["workload"], "gpus": 1, "vcpus_per_gpu": p["vcpus"], "ram_gib": p["ram_gib"],
                         "disk_class": p["disk_class"], "rate": measured, "per_gpu_rate": measured, "efficiency": 1.0,
                         "share_prediction": predicted, "gap": _gap(measured, predicted), "one_gpu_basis": "itself"})
        for r in (wl.get("scaling") or {}).get("rows", []):
            rows.append({"workload": wl["workload"], **r})
    return sorted(rows, key=lambda r: (r["workload"], r["disk_class"], r["ram_gib"], r["vcpus_per_gpu"], r["gpus"]))


def _gap(measured: float | None, predicted: float | None) -> float | None:
    return None if not measured or not predicted else (measured - predicted) / predicted


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def render(rows: list[dict[str, Any]]) -> str:
    head = ("workload", "GPUs", "vCPU/GPU", "RAM", "disk", "rate", "per GPU", "efficiency", "share pred.", "gap")
    lines = [" | ".join(head)]
    for r in rows:
        efficiency = "-" if r.get("efficiency") is None else f"{r['efficiency']:.1%}" + (
            " (model)" if r.get("one_gpu_basis") == "model" else "")
        gap = "-" if r.get("gap") is None else f"{r['gap']:+.1%}"
        lines.append(" | ".join((r["workload"], str(r["gpus"]), f"{r['vcpus_per_gpu']:g}", f"{r['ram_gib']:g}G",
                                 r["disk_class"], _num(r["rate"]), _num(r["per_gpu_rate"]), efficiency,
                                 _num(r.get("share_prediction")), gap)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="multi_gpu_table.py")
    parser.add_argument("results", type=Path)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        print(f"no results to tabulate: {args.results}: {exc}", file=sys.stderr)
        return 2
    rows = table_rows(results)
    if not any(r["gpus"] > 1 for r in rows):
        print("no multi-GPU shape with a one-GPU fit to compare it with (see the sweep's log)", file=sys.stderr)
    print(render(rows))
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
