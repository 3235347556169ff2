"""The RAM a workload needs on each disk class, and the shapes the memory limit killed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from sizer.model import WorkloadFit, meets_tolerance
from sizer.points import Point
from sizer.sizing.knee import predict_throughput
from sizer.values import significant

RAM_STEPS = 200  # the RAM search's steps between nothing and its upper end
RAM_STEP_GIB = 0.25  # each step a multiple of this


@dataclass(frozen=True)
class DiskNeed:
    """The least RAM (GiB) at which the model keeps the workload within tolerance on one disk class
    (None: no RAM up to `searched_up_to_gib` does), and its figure at that upper end."""

    disk_class: str
    disk_mbps: float | None
    min_ram_gib: float | None
    predicted_at_max_ram: float | None
    fraction_at_max_ram: float | None
    searched_up_to_gib: float


@dataclass(frozen=True)
class OutOfMemory:
    """The fewest vCPUs at which a measured shape of `ram_gib` was killed by the memory limit."""

    ram_gib: float
    from_vcpus: int


def ram_grid(low: float, high: float) -> list[float]:
    """RAM sizes from `low` to `high` in about RAM_STEPS steps of a multiple of RAM_STEP_GIB."""
    step = max(RAM_STEP_GIB, round((high - low) / RAM_STEPS / RAM_STEP_GIB) * RAM_STEP_GIB)
    grid, r = [], max(step, low)
    while r <= high + 1e-9:
        grid.append(round(r, 2))
        r += step
    return grid


def out_of_memory(points: Sequence[Point]) -> list[OutOfMemory]:
    """Per RAM size, the fewest vCPUs at which a measured shape was killed by the memory limit: a
    measured bound beside the model's single footprint (loader workers each add to it)."""
    least: dict[float, int] = {}
    for p in points:
        if p.status == "oom":
            least[p.ram_gib] = min(least.get(p.ram_gib, p.vcpus), p.vcpus)
    return [OutOfMemory(ram, least[ram]) for ram in sorted(least)]


def _least_ram(fit: WorkloadFit, ceiling: float, tolerance: float, vcpus: int, disk_mbps: float | None,
               grid: list[float]) -> float | None:
    for r in grid:
        x = predict_throughput(fit, vcpus, r, disk_mbps)
        if x is not None and meets_tolerance(x, ceiling, tolerance):
            return r
    return None


def ram_needs(fit: WorkloadFit, ceiling: float | None, tolerance: float, vcpus: int,
              disks: dict[str, float | None], ram_high: float) -> list[DiskNeed]:
    """Per disk class, the least RAM (GiB) at which the model keeps the workload within tolerance."""
    if not ceiling:
        return []
    out = []
    grid = ram_grid(0.0, ram_high)
    for name, mbps in disks.items():
        at_high = predict_throughput(fit, vcpus, ram_high, mbps)
        out.append(DiskNeed(name, mbps, _least_ram(fit, ceiling, tolerance, vcpus, mbps, grid),
                            significant(at_high, 6), significant(at_high / ceiling, 4) if at_high is not None else None,
                            ram_high))
    return out


def least_needs(needs: Sequence[DiskNeed]) -> tuple[str | None, float | None]:
    """What the workload needs: the least RAM any disk class needs, and the slowest disk class that
    needs no more than that."""
    reachable = [d for d in needs if d.min_ram_gib is not None]
    least_ram = min((d.min_ram_gib for d in reachable if d.min_ram_gib is not None), default=None)
    slowest = sorted((d for d in reachable if d.min_ram_gib == least_ram),
                     key=lambda d: math.inf if d.disk_mbps is None else d.disk_mbps)
    return (slowest[0].disk_class if slowest else None), least_ram
