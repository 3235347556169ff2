"""Points measured in a parallel sweep (`sizer sweep --parallel`): how many, in which slots, and the
interference check, the shapes measured both beside other points and alone, with the difference."""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from sizer.points import ParallelMark, Point
from sizer.values import significant


def parallel_mark(point: Point) -> ParallelMark | None:
    """Where a point measured beside others ran, None for one measured alone."""
    return point.parallel


def interference_checks(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Each shape measured both in parallel and alone: both figures and parallel / alone - 1."""
    pairs: dict[str, dict[str, Point]] = {}
    for p in points:
        key = p.interference_check
        if key:
            pairs.setdefault(key, {})["parallel" if parallel_mark(p) else "alone"] = p
    rows = []
    for key in sorted(pairs):
        beside, alone = pairs[key].get("parallel"), pairs[key].get("alone")
        if beside is None or alone is None:
            continue
        difference = None
        if beside.usable and alone.usable and alone.throughput > 0:
            difference = beside.throughput / alone.throughput - 1
        mark = parallel_mark(beside)
        rows.append({
            "key": key, "workload": beside.workload, "vcpus": beside.vcpus, "ram_gib": beside.ram_gib,
            "disk_class": beside.disk_class, "unit": beside.unit, "slot": mark.slot if mark else None,
            "gpu": mark.gpu if mark else None,
            "parallel": beside.throughput, "alone": alone.throughput, "difference": significant(difference, 4),
        })
    return rows


def parallel_context(points: Sequence[Point]) -> dict[str, Any] | None:
    """The report's account of a parallel sweep (None where no point ran beside another): the points
    measured in parallel, the interference checks, and the median and largest difference (signed,
    the largest in size) of parallel against alone."""
    marks = [m for m in (parallel_mark(p) for p in points) if m is not None]
    if not marks:
        return None
    checks = interference_checks(points)
    differences = [c["difference"] for c in checks if c["difference"] is not None]
    return {
        "points": len(marks),
        "slots": max(m.slots for m in marks),
        "gpus": sorted({m.gpu for m in marks if m.gpu is not None}),
        "checks": checks,
        "median_difference": significant(statistics.median(differences), 4) if differences else None,
        "max_difference": significant(max(differences, key=abs), 4) if differences else None,
        "note": (
            f"{len(marks)} point(s) were measured in parallel, up to {max(m.slots for m in marks)} "
            "at once, each on its own CPUs and GPU with its own limits and dataset copy. The shapes below were "
            "measured alone as well, in the same slot with nothing else running; the difference is parallel "
            "against alone."
        ),
    }
