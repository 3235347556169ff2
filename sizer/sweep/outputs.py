"""What a sweep hands back: a JSON-friendly row per point and the dry run's plan."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from typing import Any

from sizer.method import current_marks, current_status
from sizer.shapes import PlannedPoint
from sizer.sweep.pairs import pair_outline
from sizer.sweep.plan import CALIBRATION_WORKLOAD, SweepOptions, SweepPlan
from sizer.sweep.strategy import adaptive_passes, entry_most, plan_entries
from workloads.protocol import Result


def _point_identity(point: PlannedPoint) -> dict[str, Any]:
    return {"key": point.key, "workload": point.workload, **point.shape.as_dict(), "gpus": point.shape.gpus,
            "ceiling": point.ceiling, "pass": point.pass_no}


def stored_point_summary(point: PlannedPoint, row: Any) -> dict[str, Any]:
    """The row of a point a resumed sweep found stored, its status and marks by this sizer's rules."""
    result = Result.from_json(row["result"])
    return {
        **_point_identity(point),
        "status": current_status(row["status"], float(row["spread"]), result),
        "marks": list(current_marks(result)),
        "throughput": row["throughput"],
        "unit": row["unit"],
        "spread": row["spread"],
        "bottleneck": row["bottleneck"],
        "stored": True,
        "wall_s": round(row["finished"] - row["started"], 2),
    }


def point_summary(point: PlannedPoint, result: Result, wall_s: float | None, skipped: bool = False) -> dict[str, Any]:
    """The row of a point measured now."""
    return {
        **_point_identity(point),
        "stored": skipped,
        "status": result.status,
        "marks": list(current_marks(result)),  # what else marks the figure: a short window, a busy host
        "throughput": result.throughput,
        "unit": result.unit,
        "spread": result.spread,
        "bottleneck": result.bottleneck,
        "wall_s": round(wall_s or 0.0, 2),
        "cpu_seconds": result.counters.get("cgroup_cpu_seconds"),
        "read_bytes": result.counters.get("cgroup_read_bytes"),
        "memory_peak_bytes": result.counters.get("cgroup_memory_peak_bytes"),
        "error": result.error.splitlines()[0] if result.error else "",
    }


def count_statuses(rows: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(r["status"] for r in rows))


def about_minutes(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"about {minutes} minute{'s' if minutes > 1 else ''}"


def plan_outline(plan: SweepPlan, calibrate: bool) -> dict[str, Any]:
    """The plan in a few words: its grid, its passes and why, and for a plan whose start
    calibration chooses its passes, what a spread-out start would add."""
    grid = {key: plan.config[key] for key in ("workloads", "vcpus", "ram_gib", "disks")}
    grid.update(gpus=plan.config.get("gpus", [1]), vcpus_per_gpu=bool(plan.config.get("vcpus_per_gpu")))
    outline: dict[str, Any] = {**grid, "passes": plan.passes, "refine": plan.refine, "passes_reason": plan.passes_reason}
    if plan.on_spread is not None:
        spread = copy.copy(plan)
        spread.apply_start_spread(float("inf"))
        seconds = spread.estimate_s(calibrate)
        outline["if_start_spreads"] = {"passes": spread.passes, "refine": spread.refine, "points": len(spread.points),
                                       "estimated_seconds": round(seconds, 1), "estimate": about_minutes(seconds)}
    return outline


def adaptive_outline(plan: SweepPlan, opts: SweepOptions) -> dict[str, Any] | None:
    """What an adaptive sweep may measure of the planned grid: per workload entry, the grid's shapes
    and the most measurements it takes (each shape's passes, or `--max-points` where fewer), and
    what that costs at most. None for a grid sweep."""
    if opts.strategy != "adaptive":
        return None

    passes = adaptive_passes(opts.passes)
    entries, seconds = [], 0.0
    for entry in plan_entries(plan.points):
        at_most = entry_most(entry, opts.max_points, passes)
        mean_s = sum(plan.estimate_point_s(p) for p in entry.candidates) / len(entry.candidates)
        seconds += at_most * mean_s
        entries.append({"workload": entry.label, "grid_shapes": len(entry.candidates), "at_most": at_most})
    return {"max_points": opts.max_points, "passes": passes, "entries": entries, "at_most_seconds": round(seconds, 1),
            "at_most": about_minutes(seconds)}


def dry_run_summary(plan: SweepPlan, opts: SweepOptions) -> dict[str, Any]:
    seconds = plan.estimate_s(opts.calibrate)
    return {
        "dry_run": True,
        "profile": plan.profile,
        "plan": plan_outline(plan, opts.calibrate),
        "points": [
            {**_point_identity(p),
             "settings": "" if p.ceiling else ", ".join(f"{k}={v}" for k, v in sorted(p.config.items())),
             "estimated_s": round(plan.estimate_point_s(p), 1)}
            for p in plan.points
        ],
        "calibration": opts.calibrate and CALIBRATION_WORKLOAD in plan.classes,
        "estimated_seconds": round(seconds, 1),
        "estimate": about_minutes(seconds),
        "estimate_note": "measuring only; generating missing datasets comes on top",
        "refine": {"shapes_per_workload": plan.refine, "at_most": plan.refine_count()} if plan.refine else None,
        "data_dir": str(plan.data_dir),
        "device": plan.device,
        "store": str(plan.store),
        "limit_backend": dataclasses.asdict(plan.backend.info()),
        "time_budget_s": plan.time_budget_s,
        "notes": plan.notes,
        "adaptive": adaptive_outline(plan, opts),
        "pairs": [pair_outline(pair, plan.estimate_point_s) for pair in plan.pairs],
    }
