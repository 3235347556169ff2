"""What a sweep costs in wall time: per workload and in all, from a store.

For every point: its wall time (limit group, eviction, worker start, warm-up, window, clean-up:
the store's `started`..`finished`), the worker's own wall time, and the measured window. Prints per
workload the number of points, median / 90th percentile / max wall per point, the median window,
and the share of wall time spent outside the measured window; then the sweep's total. A sweep run
in slices (`sizer sweep --max-time ... --resume`) has gaps between slices: the total counts the
points, the calibration and the time between points within a slice (a gap longer than --gap
seconds is taken to be between slices and left out).

Where a point's time goes, from the worker's own timeline (`timeline_s`, seconds since the worker
process started): `start` (interpreter, imports, CUDA, model, dataset index, loader start, up to the
first step), `warm-up` (first step to the window), the window, `teardown` (window end to the
workload's return: loader workers stopped) and `rest` (the worker's exit and sizer's own part:
eviction, limit group, store), printed as medians per workload; where workers noted the stages of
their start, the start split into imports, model (on its device, CUDA context included), data
(dataset index, loader) and the first batch (loader workers forked and primed, the first step).
Where loader-fed points dropped their loader's backlog before the window (`drain_seconds`, part of
warm-up), the drain's median and longest per workload, and how many drains outlasted the drain's
own limit (workloads.loop.DRAIN_MAX_S: a backlog goes in milliseconds, so a longer drain was taking
batches at the loader's pace).

`--sweep ID` counts one sweep of the store. The last line's seconds a measurement (the sweep's wall
time over its measurements) less the sweep's --budget are what `sizer sweep --dry-run` adds to
each point's budget (sizer/sweep/defaults.py).

Usage: python lab/benchmarks/sweep_cost.py --store gpu-runs/sizer.sqlite [--sweep ID] [--json] [--gap 180]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.errors import SizerError  # noqa: E402
from workloads.loop import DRAIN_MAX_S  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


PHASES = ("start_s", "warmup_s", "teardown_s", "rest_s")


START_STAGES = ("torch_imported", "model_built", "data_opened", "first_step_done")
START_PARTS = ("imports_s", "model_s", "data_s", "first_batch_s")


def phases(timeline: dict | None, wall_s: float) -> dict:
    """A point's wall split by its worker's timeline (empty for points stored without one); where the
    worker noted the stages of its start, the start split too, each part the time from the stage
    before it: interpreter and imports up to torch, the model on its device (the CUDA context
    included), the dataset index and loader (its workers forked), and the first batch (the first
    step, once the loader had one)."""
    t = timeline or {}
    needed = ("first_step_done", "window_start", "window_end", "run_returned")
    if not all(isinstance(t.get(k), (int, float)) for k in needed):
        return {}
    out = {
        "start_s": t["first_step_done"],
        "warmup_s": t["window_start"] - t["first_step_done"],
        "teardown_s": t["run_returned"] - t["window_end"],
        "rest_s": wall_s - t["run_returned"],
    }
    # In the order the worker went through them (image workloads open their loader before the model).
    seen = sorted(((name, t[k]) for name, k in zip(START_PARTS, START_STAGES) if isinstance(t.get(k), (int, float))),
                  key=lambda item: item[1])
    if len(seen) >= 2:
        previous = 0.0
        for name, at in seen:
            out[name] = at - previous
            previous = at
    return out


def point_costs(store_path: Path) -> list[dict]:
    """One row per stored point: workload variant, wall, worker wall, window, start and end."""
    from sizer.model import group_points
    from sizer.store import Store

    rows: list[dict] = []
    with Store(store_path, create=False) as store:
        results = store.results()
        points = store.points()
        variant_of = {}
        for name, group in group_points(points).items():
            for p in group:
                variant_of.setdefault(id(p), name)
        for (row, result), point in zip(results, points):
            counters = result.counters or {}
            rows.append({
                "sweep": row["sweep_id"],
                "workload": variant_of.get(id(point), row["workload"]),
                "key": row["key"],
                "status": row["status"],
                "started": float(row["started"]),
                "finished": float(row["finished"]),
                "wall_s": float(row["finished"]) - float(row["started"]),
                "worker_wall_s": float(result.wall_s or 0.0),
                "window_s": float(counters.get("measured_seconds") or 0.0),
                **({"drain_s": float(counters["drain_seconds"])} if counters.get("drain_seconds") is not None else {}),
                **phases(result.extra.get("timeline_s"), float(row["finished"]) - float(row["started"])),
            })
        sweeps = {s.id: s for s in store.sweeps()}
    for r in rows:
        r["sweep_started"] = sweeps[r["sweep"]].started
    return rows


def drain_figures(drains: list[float]) -> dict:
    """The drains of a group of points: how many, median and longest, and how many outlasted DRAIN_MAX_S."""
    if not drains:
        return {}
    return {"drains": len(drains), "median_drain_s": statistics.median(drains), "max_drain_s": max(drains),
            "drains_over_limit": sum(1 for d in drains if d > DRAIN_MAX_S)}


def summarize(rows: list[dict], gap_s: float = 180.0) -> dict:
    """Per workload and overall figures; `active_s` is the sweep's wall time without the gaps
    between slices."""
    out: dict = {"workloads": [], "total": {}}
    by_workload: dict[str, list[dict]] = {}
    for r in rows:
        by_workload.setdefault(r["workload"], []).append(r)

    def figures(group: list[dict]) -> dict:
        walls = [r["wall_s"] for r in group]
        windows = [r["window_s"] for r in group]
        return {
            "points": len(group),
            "median_point_s": statistics.median(walls),
            "p90_point_s": _percentile(walls, 0.9),
            "max_point_s": max(walls),
            "median_window_s": statistics.median(windows),
            "outside_window_share": 1.0 - sum(windows) / sum(walls) if sum(walls) > 0 else None,
            "points_s": sum(walls),
            **{f"median_{k}": (statistics.median(v) if (v := [r[k] for r in group if k in r]) else None)
               for k in PHASES + START_PARTS},
            **drain_figures([r["drain_s"] for r in group if "drain_s" in r]),
        }

    for name in sorted(by_workload):
        out["workloads"].append({"workload": name, **figures(by_workload[name])})
    if rows:
        total = figures(rows)
        # Sweep wall time: from each sweep's start through its points, skipping the gaps between slices.
        active = 0.0
        for sweep in sorted({r["sweep"] for r in rows}):
            group = sorted((r for r in rows if r["sweep"] == sweep), key=lambda r: r["started"])
            previous_end = group[0]["sweep_started"]
            for r in group:
                gap = r["started"] - previous_end
                active += (gap if 0 <= gap <= gap_s else 0.0) + r["wall_s"]
                previous_end = r["finished"]
        total["active_s"] = active
        total["outside_points_s"] = active - total["points_s"]
        total["outside_window_share_all"] = 1.0 - sum(r["window_s"] for r in rows) / active if active > 0 else None
        out["total"] = total
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--gap", type=float, default=180.0, help="seconds between points taken as a pause between slices")
    parser.add_argument("--sweep", type=int, help="count only this sweep of the store")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        rows = point_costs(args.store)
    except SizerError as exc:
        print(f"sweep_cost: error: {exc}", file=sys.stderr)
        return 2
    if args.sweep is not None:
        rows = [r for r in rows if r["sweep"] == args.sweep]
    if not rows:
        print(f"sweep_cost: error: {args.store} holds no points" + (f" of sweep {args.sweep}" if args.sweep else ""),
              file=sys.stderr)
        return 2
    summary = summarize(rows, args.gap)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    return 0


def print_summary(summary: dict) -> None:
    """The tables of `summarize`: wall per point, where it goes, the start, the drains, the sweep."""
    workloads = summary["workloads"]
    with_total = workloads + [{"workload": "all", **summary["total"]}]
    width = max(len(w["workload"]) for w in workloads + [{"workload": "workload"}])
    print(f"{'workload':<{width}}  {'points':>6}  {'median':>7}  {'p90':>6}  {'max':>6}  {'window':>7}  {'outside':>7}")
    for w in with_total:
        print(f"{w['workload']:<{width}}  {w['points']:>6}  {w['median_point_s']:>6.1f}s  {w['p90_point_s']:>5.1f}s"
              f"  {w['max_point_s']:>5.1f}s  {w['median_window_s']:>6.1f}s  {w['outside_window_share']:>7.0%}")
    if any(w.get("median_start_s") is not None for w in workloads):
        _print_phases(with_total, width)
    if any(w.get("median_imports_s") is not None for w in workloads):
        _print_start(workloads, width)
    drained = [w for w in workloads if w.get("drains")]
    if drained:
        _print_drains(drained, width)
    t = summary["total"]
    print(f"sweep: {t['active_s'] / 60:.1f} min of wall time ({t['points']} points, {t['points_s'] / 60:.1f} min in points,"
          f" {t['outside_points_s'] / 60:.1f} min between them: calibration, datasets, reports); "
          f"{t['outside_window_share_all']:.0%} of it outside the measured windows; "
          f"{t['active_s'] / t['points']:.1f} s a measurement")


def _print_phases(workloads: list[dict], width: int) -> None:
    print(f"\n{'workload':<{width}}  {'start':>6}  {'warm-up':>7}  {'window':>7}  {'teardown':>8}  {'rest':>6}"
          "   (medians per point)")
    for w in workloads:
        if w.get("median_start_s") is None:
            continue
        print(f"{w['workload']:<{width}}  {w['median_start_s']:>5.1f}s  {w['median_warmup_s']:>6.1f}s  "
              f"{w['median_window_s']:>6.1f}s  {w['median_teardown_s']:>7.1f}s  {w['median_rest_s']:>5.1f}s")


def _print_start(workloads: list[dict], width: int) -> None:
    print(f"\n{'workload':<{width}}  {'imports':>7}  {'model':>6}  {'data':>6}  {'1st batch':>9}"
          "   (the start, medians per point)")
    for w in workloads:
        if w.get("median_imports_s") is None:
            continue
        cells = [w.get(f"median_{k}") for k in START_PARTS]
        print(f"{w['workload']:<{width}}  " + "  ".join(
            f"{'-' if c is None else f'{c:.1f}s':>{n}}" for c, n in zip(cells, (7, 6, 6, 9))))


def _print_drains(workloads: list[dict], width: int) -> None:
    over = f"over {DRAIN_MAX_S:g} s"
    print(f"\n{'workload':<{width}}  {'drains':>6}  {'median':>7}  {'longest':>7}  {over:>8}"
          "   (the loader's backlog dropped before the window)")
    for w in workloads:
        print(f"{w['workload']:<{width}}  {w['drains']:>6}  {w['median_drain_s']:>6.2f}s  {w['max_drain_s']:>6.2f}s"
              f"  {w['drains_over_limit']:>8}")


if __name__ == "__main__":
    sys.exit(main())
