"""How well does the performance model predict shapes it was not fitted on?

Loads points (a store or a points.csv), and per workload holds shapes out, fits on the rest and
predicts what was held out:

- leave-one-shape-out: every (vCPUs, RAM, disk class) shape in turn; a shape measured in several
  passes (`sizer sweep --passes`) is one point at its median, held out and compared as a whole;
- held-out vCPU level: every vCPU level in turn (all shapes at that level held out), the
  extrapolation a sweep that skipped a level would have to make;
- the fit's own leave-one-out over single points, for comparison.

Prints a table of median and max absolute percentage error per workload and method (and JSON with
--json). Synthetic-input points (the GPU ceiling) always stay in the fit: they are not shapes.

--host-speed divides the rate of every point whose vCPUs were busy (CPU util per vCPU >= 0.85) by
its host-speed probe (`Point.host_probe_mbps`: MB/s of a single-thread zlib probe of one of its vCPUs
just before and after it) relative to the workload's median probe: what the model's error is once
the shared host's changing speed is taken out. Points without a probe,
and points bound by the GPU or the disk, are left as measured.

--cpu-cost (the rule `sizer report --cpu-cost` fits with: `sizer.model.take_out_cpu_cost`) does the
same with each busy point's own CPU time per sample in its measured window (`cpu_ms_per_sample`,
from /proc of the worker's processes), relative to the median of the busy points
at the same vCPU count: the window's own measure of how fast the host ran it, taken at the same
moment as the rate (the probe runs before and after). Relative to its own vCPU count, so what more
vCPUs cost per sample (contention) stays in the figures.

--passes K keeps only the measurements of the first K passes of a sweep measured with `--passes`:
run with 1, 2, ... on one store, it shows, from one run, what each further pass bought.
--tiebreak SPREAD (with --passes K) adds pass K+1 only for the shapes whose first K figures differ
by more than SPREAD (max over min less 1): what a sweep that measured a shape again only where its
passes disagree would have given, from a sweep that measured K+1 passes of every shape.
--refine N (with --passes K) adds pass K+1 only for each workload's N shapes with the largest
held-out error after the first K passes: what a sweep that measured again the shapes its model
predicts worst would have given (a shape whose passes both ran fast, by amounts within a
tie-break's spread, is singled out by its error, not by its spread; one fast by the same amount
twice stays so, since the median of three keeps two agreeing figures).

--hold vcpus holds out each vCPU level in turn (every shape at it) and prints, per workload and
level, the measured rate, the prediction and the range at --confidence (default 0.9) of the shape
whose measurement lies farthest outside its range (nearest its edge where all lie inside), how many
of the level's shapes lie inside, and the level's largest error. The range is the one a report
fitted without the level gives at that vCPU count: the measurements' spread, widened by the
model's own held-out error at the neighbouring measured levels (`sizer.model.level_error`, found by
holding those out in turn from what is left). It ends with the acceptance: the largest error is at
most 15% on every workload, or every held-out shape lies inside its range.

Usage: .venv/bin/python lab/benchmarks/model_accuracy.py (--store results/sizer.db | --input points.csv)
       [--host-speed | --cpu-cost] [--passes K [--tiebreak SPREAD | --refine N]]
       [--hold vcpus [--confidence C]] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.diskclasses import load_disk_classes  # noqa: E402
from sizer.errors import SizerError  # noqa: E402
from sizer.model import (  # noqa: E402
    fit_group,
    group_points,
    held_out_errors,
    scale_busy_points,
    shape_of,
    take_out_cpu_cost,
    worst_predicted,
)
from sizer.points import Point, combine_passes  # noqa: E402
from sizer.variants import SYNTHETIC_INPUT  # noqa: E402


def _errors(name: str, points: list[Point], hold, table) -> list[float]:
    """Absolute percentage errors of held-out points; `hold(p)` gives the group key of a point."""
    return [err for errs in held_out_errors(name, points, table, hold).values() for err in errs]


def evaluate(points: list[Point]) -> list[dict]:
    table = load_disk_classes()
    rows = []
    for name, group in sorted(group_points(points).items()):
        fit = fit_group(name, group, table)
        if fit is None:
            continue
        methods = {
            "leave-one-point-out": [abs(x - p.throughput) / p.throughput for p, x in fit.loo],
            "leave-one-shape-out": _errors(name, group, shape_of, table),
            "held-out vCPU level": _errors(name, group, lambda p: p.vcpus, table),
        }
        for method, errs in methods.items():
            rows.append({
                "workload": name,
                "method": method,
                "n": len(errs),
                "median_ape": statistics.median(errs) if errs else None,
                "max_ape": max(errs) if errs else None,
            })
    return rows


def held_out_levels(points: list[Point], confidence: float = 0.9) -> list[dict]:
    """Per workload and vCPU level: the level's shapes held out (synthetic-input points stay), the
    rest fitted; each held-out shape's measurement, prediction, error and the range at `confidence`
    a report of that fit gives at its shape (`--hold vcpus`; shapes at their median, as fitted)."""
    from sizer.model.level_error import vcpu_band
    from sizer.model.uncertainty import fit_draws, model_range

    table = load_disk_classes()
    rows = []
    for name, group in sorted(group_points(points).items()):
        real = [p for p in group if p.usable and p.input != SYNTHETIC_INPUT]
        for level in sorted({p.vcpus for p in real}):
            train = [p for p in group if p.usable and (p.input == SYNTHETIC_INPUT or p.vcpus != level)]
            fit = fit_group(name, train, table, loo=False) if sum(p.vcpus != level for p in real) >= 2 else None
            if fit is None:
                continue
            draws = fit_draws(fit)
            band = vcpu_band(fit, level, confidence)
            shapes = []
            for p in (p for p in real if p.vcpus == level):
                predicted = fit.predict_measured(p)
                low, high = model_range(draws, predicted, confidence, band)
                shapes.append({"shape": f"{p.ram_gib:g} GiB / {p.disk_class}", "measured": p.throughput,
                               "predicted": predicted.throughput, "low": low, "high": high,
                               "error": abs(predicted.throughput - p.throughput) / p.throughput,
                               "inside": low <= p.throughput <= high})
            rows.append({"workload": name, "vcpus": level, "n": len(shapes), "band": band,
                         "max_ape": max(s["error"] for s in shapes), "inside": sum(s["inside"] for s in shapes),
                         "confidence": confidence, "worst": max(shapes, key=_outside), "shapes": shapes})
    return rows


def _outside(shape: dict) -> float:
    """How far a measurement lies outside its range, relative to the prediction (below 0: inside)."""
    return max(shape["low"] - shape["measured"], shape["measured"] - shape["high"]) / shape["predicted"]


# The acceptance's first route: the largest held-out error on every workload at most this.
LEVEL_MAX_APE = 0.15


def acceptance(rows: list[dict]) -> tuple[bool, bool]:
    """(every workload's largest held-out error is at most LEVEL_MAX_APE, every held-out shape lies in its range)."""
    return (all(r["max_ape"] <= LEVEL_MAX_APE for r in rows), all(r["inside"] == r["n"] for r in rows))


def print_levels(rows: list[dict]) -> None:
    width = max([len(r["workload"]) for r in rows] + [8])
    print(f"{'workload':<{width}}  {'vCPUs out':>9}  {'shape (worst)':<22}  {'measured':>9}  {'predicted':>9}  "
          f"{'range':>19}  {'band':>6}  {'in range':>8}  {'max err':>7}")
    for r in rows:
        w = r["worst"]
        print(f"{r['workload']:<{width}}  {r['vcpus']:>9}  {w['shape']:<22}  {w['measured']:>9,.0f}  "
              f"{w['predicted']:>9,.0f}  {format(w['low'], ',.0f') + ' - ' + format(w['high'], ',.0f'):>19}  "
              f"{r['band']:>6.1%}  {r['inside']:>4}/{r['n']:<3}  {r['max_ape']:>7.1%}")
    for name in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == name]
        inside, total = sum(r["inside"] for r in mine), sum(r["n"] for r in mine)
        print(f"{name}: max {max(r['max_ape'] for r in mine):.1%} over {len(mine)} held-out levels; "
              f"{inside} of {total} held-out shapes inside the {mine[0]['confidence']:g} range")
    errors_ok, ranges_ok = acceptance(rows)
    inside, total = sum(r["inside"] for r in rows), sum(r["n"] for r in rows)
    print(f"acceptance {'holds' if errors_ok or ranges_ok else 'FAILS'}: max error <= {LEVEL_MAX_APE:.0%} on every "
          f"workload: {'yes' if errors_ok else 'no'} ({max(r['max_ape'] for r in rows):.1%}); every held-out "
          f"shape inside its range: {'yes' if ranges_ok else 'no'} ({inside} of {total})")


def first_passes(points: list[Point], k: int) -> list[Point]:
    """The measurements of the first `k` passes of a sweep measured with `--passes`."""
    if k < 1:
        raise SizerError(f"--passes wants 1 or more, got {k}")
    return [p for p in points if p.pass_no <= k]


def tiebreak_passes(points: list[Point], k: int, spread: float) -> tuple[list[Point], int]:
    """The first `k` passes of every shape, and pass k+1 of the shapes whose first `k` usable figures
    differ by more than `spread` (max / min - 1); with the count of measurements so added."""
    from sizer.points import repeat_key

    if not spread > 0:
        raise SizerError(f"--tiebreak wants a spread above 0 (0.1 = 10%), got {spread:g}")
    kept = first_passes(points, k)
    rates: dict[tuple, list[float]] = {}
    for p in kept:
        if p.usable:
            rates.setdefault(repeat_key(p), []).append(p.throughput)
    torn = {key for key, r in rates.items() if len(r) >= 2 and max(r) / min(r) - 1 > spread}
    extra = [p for p in points if p.pass_no == k + 1 and repeat_key(p) in torn]
    return kept + extra, len(extra)


def refine_passes(points: list[Point], k: int, n: int) -> tuple[list[Point], int]:
    """The first `k` passes of every shape, and pass k+1 of each workload's `n` shapes whose held-out
    error (leave-one-shape-out, each shape at the median of its first `k` figures) is largest; with
    the count of measurements so added."""
    kept = first_passes(points, k)
    worst = {(p.workload, shape_of(p)) for p, _ in worst_predicted(kept, load_disk_classes(), n)}
    extra = [p for p in points if p.pass_no == k + 1 and (p.workload, shape_of(p)) in worst]
    return kept + extra, len(extra)


def host_speed(point: Point) -> float | None:
    """The mean of a point's probe before and after it, or None for a point stored without one."""
    return point.host_probe_mbps


def normalize_host_speed(points: list[Point]) -> tuple[list[Point], int]:
    """Busy points divided by their host-speed probe relative to the workload's median probe."""
    scaled = scale_busy_points(points, host_speed, reference_all=True)
    return scaled, sum(p.speed_scale is not None for p in scaled)


def normalize_cpu_cost(points: list[Point]) -> tuple[list[Point], int]:
    """Busy points scaled by their window's CPU time per sample relative to the median at their vCPU
    count: what `sizer report --cpu-cost` fits on."""
    scaled = take_out_cpu_cost(points)
    return scaled, sum(p.speed_scale is not None for p in scaled)


def _load(store: Path | None, input_file: Path | None) -> list[Point]:
    from sizer.commands.model import load_points

    return load_points(store, input_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path)
    parser.add_argument("--input", type=Path)
    drift = parser.add_mutually_exclusive_group()
    drift.add_argument("--host-speed", action="store_true", help="take the host's changing speed out first (its probe)")
    drift.add_argument("--cpu-cost", action="store_true",
                       help="take the host's changing speed out first (each window's CPU time per sample)")
    parser.add_argument("--passes", type=int, metavar="K",
                        help="use only the first K passes of a sweep measured with --passes (what fewer would have given)")
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--tiebreak", type=float, metavar="SPREAD",
                       help="with --passes K: add pass K+1 only where a shape's first K figures differ by more than SPREAD")
    again.add_argument("--refine", type=int, metavar="N",
                       help="with --passes K: add pass K+1 only for each workload's N shapes with the largest held-out error")
    parser.add_argument("--hold", choices=("vcpus",),
                        help="vcpus: per held-out vCPU level, the error and whether the model's range holds it")
    parser.add_argument("--confidence", type=float, default=0.9, help="level of the range (--hold vcpus)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.confidence < 1:
        print("model_accuracy: error: --confidence must be a fraction between 0 and 1", file=sys.stderr)
        return 2
    if args.tiebreak is not None and args.passes is None:
        print("model_accuracy: error: --tiebreak needs --passes K (the passes the tie-break follows)", file=sys.stderr)
        return 2
    if args.refine is not None and (args.passes is None or args.refine < 1):
        print("model_accuracy: error: --refine N needs N >= 1 and --passes K (the passes it follows)", file=sys.stderr)
        return 2
    try:
        points = _load(args.store, args.input)
        if args.tiebreak is not None:
            points, n = tiebreak_passes(points, args.passes, args.tiebreak)
            print(f"tie-break: {n} measurement(s) of pass {args.passes + 1} added", file=sys.stderr)
        elif args.refine is not None:
            points, n = refine_passes(points, args.passes, args.refine)
            print(f"refine: {n} measurement(s) of pass {args.passes + 1} added", file=sys.stderr)
        elif args.passes is not None:
            points = first_passes(points, args.passes)
        if args.host_speed:
            points, n = normalize_host_speed(points)
            print(f"host speed: {n} busy point(s) divided by their relative probe", file=sys.stderr)
        if args.cpu_cost:
            points, n = normalize_cpu_cost(points)
            print(f"cpu cost: {n} busy point(s) scaled by their window's CPU time per sample", file=sys.stderr)
        # One point per shape: a shape measured in several passes is held out and compared at its
        # median, as the model fits it (after any correction of each measurement).
        if args.hold:
            levels = held_out_levels(combine_passes(points), args.confidence)
        else:
            rows = evaluate(combine_passes(points))
    except SizerError as exc:
        print(f"model_accuracy: error: {exc}", file=sys.stderr)
        return 2
    if args.hold:
        if args.json:
            print(json.dumps(levels, indent=2))
        else:
            print_levels(levels)
        return 0
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max([len(r["workload"]) for r in rows] + [8])
    print(f"{'workload':<{width}}  {'method':<20}  {'n':>4}  {'median':>7}  {'max':>7}")
    for r in rows:
        med = "-" if r["median_ape"] is None else f"{r['median_ape']:.1%}"
        mx = "-" if r["max_ape"] is None else f"{r['max_ape']:.1%}"
        print(f"{r['workload']:<{width}}  {r['method']:<20}  {r['n']:>4}  {med:>7}  {mx:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
