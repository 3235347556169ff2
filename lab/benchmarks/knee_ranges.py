"""Does the knee range a report gives hold the knee that other machines measured?

For a main store and replicate stores (the same sweep run on other machines of the same kind),
prints per workload the main store's vCPU knee range at --confidence, as its report gives it (the
model's knee at the optimistic and at the pessimistic end of the host speeds the sweep saw, widened
by the model's own held-out error where it extrapolates; open above, "more than N", where the
measurements do not settle the plateau: docs/report.md), and per replicate its measured knee (the
fewest measured vCPUs whose best rate is within --tolerance of its ceiling, "beyond N" where no
measured count is) and whether it lies inside the range. A knee beyond N lies inside a range that
is open above or reaches above N. Workloads are matched by name and decode mode. The replicate's
own model knee is printed beside it, for reference.

--examples DIR... checks each example folder's `sizer.sqlite` against the replicates of the same
name (`lab/replicates/<name>/*.sqlite`), e.g. `--examples examples/h100 examples/h200`; the stores
are copied to a temporary folder first, since opening a store may migrate it. Points files (`.csv`)
are read as well as stores.

Usage: .venv/bin/python lab/benchmarks/knee_ranges.py MAIN REPLICATE... [--confidence C] [--tolerance T] [--json]
       .venv/bin/python lab/benchmarks/knee_ranges.py --examples DIR... [--confidence C] [--tolerance T] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.errors import SizerError  # noqa: E402
from sizer.variants import Variant  # noqa: E402

REPLICATES = Path(__file__).resolve().parents[1] / "replicates"  # lab/replicates/<example>/*.sqlite


def _context(path: Path, confidence: float, tolerance: float) -> dict[str, Any]:
    from sizer.report import build_context
    from sizer.report.load import load_inputs

    inputs = load_inputs(None, path) if path.suffix == ".csv" else load_inputs(path, None)
    return build_context(inputs["points"], sweeps=inputs["sweeps"], confidence=confidence, tolerance=tolerance)


def _knees(context: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (workload, decode): each entry of the report (one per host where it fitted hosts apart)
    with its knee and the measured knee of that decode mode."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for wl in context["workloads"]:
        variant = (wl.get("host") or {}).get("variant") or wl["workload"]
        base = Variant.from_label(variant).workload
        for row in wl["knee"]["by_decode"]:
            out.setdefault((base, row["decode"] or ""), []).append(
                {"label": wl["workload"], "knee": wl["knee"], "measured": row})
    return out


def contains(knee_range: dict[str, Any] | None, knee: int | None, top: int) -> bool | None:
    """Whether a measured knee (None: beyond `top`, the largest measured count) lies in a report's
    range (None: the report gives no range)."""
    if not knee_range:
        return None
    low, high = knee_range["low"], knee_range["high"]
    if low is None:  # not reached even at the optimistic end: only a knee beyond the measured counts agrees
        return knee is None
    open_above = bool(knee_range.get("beyond_measured")) or high is None
    if knee is None:
        return open_above or high > top
    return low <= knee and (open_above or knee <= high)


def range_text(knee_range: dict[str, Any] | None) -> str:
    """The range as the report words it: "14 to 17", "14 to more than 16", "not reached by 64"."""
    if not knee_range:
        return "-"
    low, high, top = knee_range["low"], knee_range["high"], knee_range.get("measured_up_to")
    if low is None:
        return f"not reached by {knee_range['searched_up_to']}"
    if knee_range.get("beyond_measured") and top is not None:
        return f"{low} to more than {top}" if low <= top else f"more than {top}"
    if high is None:
        return f"{low} to not reached"
    return str(low) if high == low else f"{low} to {high}"


def knee_text(knee: int | None, top: int) -> str:
    return str(knee) if knee is not None else f"beyond {top}"


def compare(main: Path, replicates: list[Path], confidence: float = 0.9, tolerance: float = 0.05) -> list[dict]:
    reference = _knees(_context(main, confidence, tolerance))
    rows = []
    for path in replicates:
        for key, reps in _knees(_context(path, confidence, tolerance)).items():
            rows += [_row(ref, rep, path.name) for ref in reference.get(key, []) for rep in reps]
    return rows


def _row(ref: dict[str, Any], rep: dict[str, Any], replicate: str) -> dict[str, Any]:
    """One replicate's measured knee against one entry's range."""
    knee_range = ref["knee"]["range"]
    rep_top = max(rep["measured"]["measured_vcpus"])
    return {
        "workload": ref["label"],
        "replicate": replicate,
        "range": range_text(knee_range),
        "range_low": knee_range["low"] if knee_range else None,
        "range_high": knee_range["high"] if knee_range else None,
        "range_open_above": bool(knee_range and knee_range.get("beyond_measured")),
        "main_measured": ref["measured"]["knee_vcpus"],
        "main_top": max(ref["measured"]["measured_vcpus"]),
        "replicate_measured": rep["measured"]["knee_vcpus"],
        "replicate_top": rep_top,
        "replicate_model": rep["knee"]["predicted_vcpus"],
        "inside": contains(knee_range, rep["measured"]["knee_vcpus"], rep_top),
    }


def compare_examples(folders: list[Path], confidence: float, tolerance: float) -> list[dict]:
    """`compare` for each example folder's store and its replicates, on copies of them."""
    rows = []
    for folder in folders:
        main = folder / "sizer.sqlite"
        replicates = sorted((REPLICATES / folder.name).glob("*.sqlite"))
        if not main.is_file() or not replicates:
            raise SizerError(f"{folder} holds no sizer.sqlite, or {REPLICATES / folder.name} no *.sqlite")
        with tempfile.TemporaryDirectory() as tmp:
            copies = []
            for i, path in enumerate([main, *replicates]):
                copies.append(Path(tmp) / str(i) / path.name)
                copies[-1].parent.mkdir()
                shutil.copy2(path, copies[-1])
            rows += [{"example": folder.name, **row} for row in compare(copies[0], copies[1:], confidence, tolerance)]
    return rows


def print_rows(rows: list[dict], confidence: float) -> None:
    width = max([len(r["workload"]) for r in rows] + [8])
    example = any("example" in r for r in rows)
    print(f"{'example  ' if example else ''}{'workload':<{width}}  {'knee range at ' + format(confidence, 'g'):>20}  "
          f"{'main':>9}  {'replicate':<26}  {'measured':>9}  {'model':>5}  contained")
    for r in rows:
        print(f"{r.get('example', ''):<9}" if example else "", end="")
        print(f"{r['workload']:<{width}}  {r['range']:>20}  {knee_text(r['main_measured'], r['main_top']):>9}  "
              f"{r['replicate']:<26}  {knee_text(r['replicate_measured'], r['replicate_top']):>9}  "
              f"{r['replicate_model'] if r['replicate_model'] is not None else '-':>5}  "
              f"{'-' if r['inside'] is None else ('yes' if r['inside'] else 'no')}")
    judged = [r["inside"] for r in rows if r["inside"] is not None]
    print(f"{sum(judged)} of {len(judged)} replicate knees inside the main store's range")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("main", type=Path, nargs="?", help="the store (or points.csv) whose knee range is checked")
    parser.add_argument("replicates", type=Path, nargs="*", help="stores (or points.csv) of the same sweep elsewhere")
    parser.add_argument("--examples", type=Path, nargs="+", metavar="DIR",
                        help="example folders, each with sizer.sqlite and lab/replicates/<name>/*.sqlite")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if bool(args.examples) == bool(args.main) or (args.main and not args.replicates):
        print("knee_ranges: error: give MAIN REPLICATE... or --examples DIR...", file=sys.stderr)
        return 2
    try:
        if args.examples:
            rows = compare_examples(args.examples, args.confidence, args.tolerance)
        else:
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
