"""Does the knee range a report gives hold the knee that other machines measured?

For a main store and replicate stores (the same sweep run on other machines of the same kind),
prints per workload the main store's vCPU knee range at --confidence (the report's: the model's
knee at the optimistic and at the pessimistic end of the host speeds the sweep saw), and per
replicate its measured knee (the fewest measured vCPUs within --tolerance of its ceiling, or "more
than" its largest count where none is) and whether it lies inside the range. A knee "more than N"
lies inside when the range reaches above N. Workloads are matched by name and decode mode.
The replicate's own model knee is printed beside it, for reference.

Every store is only read, but opening one may migrate it: give copies of committed stores.
Points files (`.csv`) are read as well.

Usage: .venv/bin/python benchmarks/knee_ranges.py MAIN REPLICATE... [--confidence C] [--tolerance T] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sizer.errors import SizerError  # noqa: E402
from sizer.variants import Variant  # noqa: E402


def _context(path: Path, confidence: float, tolerance: float) -> dict[str, Any]:
    from sizer.commands.model import load_points
    from sizer.report import build_context

    points = load_points(None, path) if path.suffix == ".csv" else load_points(path, None)
    return build_context(points, confidence=confidence, tolerance=tolerance)


def _knees(context: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (workload, decode): the workload's knee entry with the measured knee of that decode mode."""
    out = {}
    for wl in context["workloads"]:
        base = Variant.from_label(wl["workload"]).workload
        for row in wl["knee"]["by_decode"]:
            out[(base, row["decode"] or "")] = {"label": wl["workload"], "knee": wl["knee"], "measured": row}
    return out


def inside(knee_range: dict[str, Any] | None, measured: dict[str, Any]) -> bool | None:
    """Whether a measured knee lies in a range (None: the main store gives no range)."""
    if not knee_range or knee_range["low"] is None:
        return None
    high = knee_range["high"] if knee_range["high"] is not None else float("inf")
    knee = measured["knee_vcpus"]
    if knee is None:  # not reached: more than the largest measured count
        return high > max(measured["measured_vcpus"])
    return knee_range["low"] <= knee <= high


def compare(main: Path, replicates: list[Path], confidence: float = 0.9, tolerance: float = 0.05) -> list[dict]:
    reference = _knees(_context(main, confidence, tolerance))
    rows = []
    for path in replicates:
        for key, rep in _knees(_context(path, confidence, tolerance)).items():
            ref = reference.get(key)
            if ref is None:
                continue
            rows.append({
                "workload": ref["label"],
                "replicate": path.name,
                "range_low": ref["knee"]["range"]["low"] if ref["knee"]["range"] else None,
                "range_high": ref["knee"]["range"]["high"] if ref["knee"]["range"] else None,
                "main_measured": ref["measured"]["knee_vcpus"],
                "main_top": max(ref["measured"]["measured_vcpus"]),
                "replicate_measured": rep["measured"]["knee_vcpus"],
                "replicate_top": max(rep["measured"]["measured_vcpus"]),
                "replicate_model": rep["knee"]["predicted_vcpus"],
                "inside": inside(ref["knee"]["range"], rep["measured"]),
            })
    return rows


def _knee_text(knee: int | None, top: int) -> str:
    return str(knee) if knee is not None else f">{top}"


def print_rows(rows: list[dict], confidence: float) -> None:
    width = max([len(r["workload"]) for r in rows] + [8])
    print(f"{'workload':<{width}}  {'range at ' + format(confidence, 'g'):>13}  {'main':>5}  "
          f"{'replicate':<26}  {'measured':>8}  {'model':>5}  inside")
    for r in rows:
        low = "-" if r["range_low"] is None else str(r["range_low"])
        high = ">" if r["range_high"] is None else str(r["range_high"])
        print(f"{r['workload']:<{width}}  {low + ' to ' + high:>13}  {_knee_text(r['main_measured'], r['main_top']):>5}  "
              f"{r['replicate']:<26}  {_knee_text(r['replicate_measured'], r['replicate_top']):>8}  "
              f"{r['replicate_model'] if r['replicate_model'] is not None else '-':>5}  "
              f"{'-' if r['inside'] is None else ('yes' if r['inside'] else 'no')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("main", type=Path, help="the store (or points.csv) whose knee range is checked")
    parser.add_argument("replicates", type=Path, nargs="+", help="stores (or points.csv) of the same sweep elsewhere")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        rows = compare(args.main, args.replicates, args.confidence, args.tolerance)
    except SizerError as exc:
        print(f"knee_ranges: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_rows(rows, args.confidence)
    return 0


if __name__ == "__main__":
    sys.exit(main())
