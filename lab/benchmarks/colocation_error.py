"""How well does the pair model predict a pair of jobs on one GPU it was not fitted on?

Loads the points of a store (or a points.csv) that hold pairs measured with `sizer colocate` or
`sizer sweep --colocate`, and per sharing mode (time-sliced, MPS) leaves each measured pair out in
turn: the model (`sizer.model.colocation`) fitted on the other pairs predicts both its slowdowns,
r_AB and r_BA, from each job's profile alone on its half. Prints one row per slowdown (pair, job,
partner, measured r, predicted r, error = predicted / measured - 1), then per sharing mode the mean
and the largest absolute error, the coefficients fitted on every pair, and whether the mean meets
--goal (default 10%). With --json, the same as JSON.

Usage: python lab/benchmarks/colocation_error.py (--store STORE | --input points.csv) [--goal 0.10] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sizer.errors import SizerError
from sizer.model.colocation import fit_colocation
from sizer.model.pairs import PairRecord, pair_records
from sizer.points import read_points_csv
from sizer.store import Store


def load_records(store: Path | None, points_csv: Path | None) -> list[PairRecord]:
    """The measured pairs of a store or a points file."""
    if store is not None:
        if not store.exists():
            raise SizerError(f"no store at {store}")
        with Store(store, create=False) as opened:
            points = opened.points()
    elif points_csv is not None:
        points = read_points_csv(points_csv)
    else:
        raise SizerError("give --store STORE or --input points.csv")
    return pair_records(points)


def errors(records: list[PairRecord], goal: float) -> dict[str, Any]:
    """Per sharing mode: each slowdown held out, the mean and largest error, the fitted coefficients."""
    out: dict[str, Any] = {}
    for sharing in sorted({r.sharing for r in records if r.measured}):
        model = fit_colocation(records, sharing)
        rows = [{"pair": h.pair, "job": h.job, "partner": h.partner, "measured": round(h.measured, 4),
                 "predicted": round(h.predicted, 4), "error": round(h.error, 4)} for h in model.held_out]
        largest = max((abs(r["error"]) for r in rows), default=None)
        out[sharing] = {"pairs": model.pairs, "held_out": rows, "mean_error": model.mean_error, "max_error": largest,
                        "coefficients": dict(model.coefficients),
                        "meets_goal": None if model.mean_error is None else model.mean_error <= goal}
    return out


def print_table(result: dict[str, Any], goal: float) -> None:
    if not result:
        print("no pair with both slowdowns measured: nothing to hold out")
        return
    for sharing, part in result.items():
        print(f"{sharing}-shared: {part['pairs']} measured pair(s), each left out in turn")
        print(f"  {'pair':<58} {'job':<28} {'measured r':>10} {'predicted':>10} {'error':>8}")
        for row in part["held_out"]:
            print(f"  {row['pair'][:58]:<58} {row['job'][:28]:<28} {row['measured']:>10.3f} {row['predicted']:>10.3f} "
                  f"{row['error']:>+8.1%}")
        if part["mean_error"] is None:
            print("  too few pairs to hold one out")
            continue
        fitted = ", ".join(f"{k} {v:.3g}" for k, v in part["coefficients"].items()) or "no term"
        verdict = "meets" if part["meets_goal"] else "misses"
        print(f"  held-out error: mean {part['mean_error']:.1%}, largest {part['max_error']:.1%} ({verdict} the goal "
              f"of {goal:.0%}); fitted on every pair: {fitted}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path)
    parser.add_argument("--input", type=Path)
    parser.add_argument("--goal", type=float, default=0.10, help="the mean held-out error aimed at (0.10 = 10%%)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = errors(load_records(args.store, args.input), args.goal)
    except SizerError as exc:
        print(f"colocation_error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, args.goal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
