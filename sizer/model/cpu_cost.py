"""Taking the shared host's changing CPU speed out of CPU-bound measurements."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Callable

from sizer.model.grouping import group_points
from sizer.points import Point

# A point whose vCPUs were at least this busy (CPU util per vCPU) is CPU-bound: its rate follows the
# speed the shared host gave its CPUs at that moment.
BUSY_CPU_UTIL = 0.85


def window_cpu_speed(point: Point) -> float | None:
    """Samples per CPU-second in the point's measured window (1 / its CPU time per sample), if known."""
    ms = point.cpu_ms_per_sample
    return 1000.0 / ms if ms is not None and ms > 0 else None


def scale_busy_points(points: list[Point], speed: Callable[[Point], float | None], *, by_vcpus: bool = False,
                      reference_all: bool = False) -> list[Point]:
    """The host's changing speed taken out of CPU-bound figures: a copy of `points` in which every
    busy point's rate is divided by its speed (`speed(p)`, None where unknown) relative to the median
    speed of its workload's busy points (of all its points with a speed: `reference_all`), or of those
    at its vCPU count (`by_vcpus`, which keeps what more vCPUs cost per sample in the figures). A
    scaled point is a new one with its factor in `speed_scale`; the points given stay as
    they are."""
    factors: dict[int, float] = {}
    for group in group_points(points).values():
        speeds = {id(p): s for p in group if (s := speed(p))}
        measured = [p for p in group if id(p) in speeds]
        busy = [p for p in measured if (p.cpu_util_per_vcpu or 0.0) >= BUSY_CPU_UTIL]
        references: dict[Any, list[float]] = {}
        for p in measured if reference_all else busy:
            references.setdefault(p.vcpus if by_vcpus else None, []).append(speeds[id(p)])
        for p in busy:  # a synthetic-input point joins several groups: scaled once
            reference = statistics.median(references[p.vcpus if by_vcpus else None])
            factors.setdefault(id(p), reference / speeds[id(p)])
    return [dataclasses.replace(p, throughput=p.throughput * f, speed_scale=f)
            if (f := factors.get(id(p))) is not None else p for p in points]


def take_out_cpu_cost(points: list[Point]) -> list[Point]:
    """Busy points scaled by their own window's CPU time per sample over the median of the busy points
    at their vCPU count (`fit_points(cpu_cost=True)`, `sizer report --cpu-cost`). Measured at the
    same moment as the rate, it says how fast the shared host ran that window; a shape that really
    costs more CPU per sample than others at its vCPU count is evened out with them too, which the
    model, one CPU term per workload, could not tell apart anyway."""
    return scale_busy_points(points, window_cpu_speed, by_vcpus=True)


def cpu_cost_note(group: list[Point]) -> str:
    """The fit's note on what `cpu_cost` changed in one workload's measurements."""
    factors = [p.speed_scale for p in group if p.speed_scale is not None]
    if not factors:
        return "fitted with --cpu-cost: no CPU-bound point with its window's CPU time, so every figure is as measured"
    return (f"fitted with --cpu-cost: {len(factors)} CPU-bound measurement(s) scaled by their window's CPU "
            f"time per sample over the median at their vCPU count (x{min(factors):.2f} to x{max(factors):.2f}), "
            f"taking the shared host's changing speed out; the points shown are as measured")
