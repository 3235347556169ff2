"""Plain-words warnings about a workload's measurements, each derived from the figures. Pure
functions of their arguments."""

from __future__ import annotations

import statistics
from typing import Sequence

from sizer.model import BUSY_CPU_UTIL, WorkloadFit, window_cpu_speed
from sizer.points import Point
from sizer.values import finite_number
from sizer.variants import SYNTHETIC_INPUT

NOISY_RATE_DROP = 0.10  # a rate that falls by more than this with more vCPUs says the host was busy
ROUGH_MODEL_APE = 0.10  # a leave-one-out median error above this makes predictions rough
NOISY_POINTS_WARNED = 2  # the fewest noisy points of a workload that make a warning
# CPU-bound windows at one vCPU count whose CPU time per sample differs by more than this ran at
# different speeds of the host (3.3 against 4.9 ms an image at 2 vCPUs on one measured host).
CPU_COST_SPREAD = 0.20


# ---------------------------------------------------------------------------- warnings
def _noisy_warning(usable: list[Point]) -> str | None:
    """Two noisy points or more: one is chance (3 of 100 points on an idle host, docs/PERFORMANCE.md,
    "The noisy threshold"), and the card's count shows it."""
    noisy = [p for p in usable if p.status == "noisy"]
    if len(noisy) < NOISY_POINTS_WARNED:
        return None
    # The median as well as the worst: a loader-fed point at few vCPUs holds a handful of rounds, and
    # one sub-window holding a burst can read many times its neighbours' rate.
    worst = max(noisy, key=lambda p: p.spread)
    typical = statistics.median(p.spread for p in noisy)
    return (
        f"{len(noisy)} of {len(usable)} points were flagged noisy: the rates of their sub-windows differed by "
        f"{typical:.0%} (median), up to {worst.spread:.0%} (at {worst.shape_label()}): the host was probably "
        "busy with other work, or a loader handed over batches in bursts that a sub-window of a few batches "
        "splits unevenly. A point's figure is its whole window's rate."
    )


def _falling_rate_warning(pipeline: list[Point]) -> str | None:
    """Where a series of one RAM size, disk class, decode and input gets slower with more vCPUs."""
    series: dict[tuple, list[Point]] = {}
    for p in pipeline:
        series.setdefault((p.ram_gib, p.disk_class, p.decode, p.input), []).append(p)
    drops = []
    for pts in series.values():
        pts.sort(key=lambda p: p.vcpus)
        for a, b in zip(pts, pts[1:]):
            if b.vcpus > a.vcpus and b.throughput < (1 - NOISY_RATE_DROP) * a.throughput:
                drops.append((a, b))
    if not drops:
        return None
    a, b = max(drops, key=lambda ab: ab[0].throughput / ab[1].throughput)
    return (
        f"The measured rate fell with more vCPUs at {len(drops)} step(s), for example from "
        f"{a.throughput:,.4g} at {a.vcpus} to {b.throughput:,.4g} {a.unit} at {b.vcpus} vCPUs "
        f"({a.ram_gib:g} GiB, {a.disk_class}): more vCPUs should not be slower, so these points disagree."
    )


def _understated_ceiling_warning(alone: list[Point], pipeline: list[Point]) -> str | None:
    if not (alone and pipeline):
        return None
    ceiling = statistics.median(p.throughput for p in alone)
    best = max(pipeline, key=lambda p: p.throughput)
    if best.throughput <= (1 + NOISY_RATE_DROP) * ceiling:
        return None
    return (
        f"The GPU-alone point ({ceiling:,.4g} {best.unit}, input already on the device) is slower than the "
        f"real pipeline at {best.shape_label()} ({best.throughput:,.4g}): the ceiling is understated."
    )


def _cpu_cost_warning(usable: list[Point]) -> str | None:
    moved = _cpu_cost_spread(usable)
    if not moved:
        return None
    vcpus, low, high = moved
    return (
        f"CPU-bound windows at {vcpus} vCPUs spent {low:.2f} to {high:.2f} ms of CPU per sample "
        f"({high / low - 1:.0%} apart): the host's speed moved during the sweep, or these shapes cost "
        f"different CPU per sample; sizer report --cpu-cost fits with each window's CPU cost taken out."
    )


def _rough_model_warning(fit: WorkloadFit | None) -> str | None:
    loo = finite_number(fit.loo_median_ape) if fit is not None else None
    if loo is None or loo <= ROUGH_MODEL_APE:
        return None
    return f"The model misses held-out points by a median {loo:.0%}: its predictions for unmeasured shapes are rough."


def busy_host_signs(points: Sequence[Point]) -> list[str]:
    """The warnings that speak of the host rather than the model: noisy points and rates that fall
    with more vCPUs. Only these raise the report's "busy or unstable host" notice."""
    usable = [p for p in points if p.usable]
    pipeline = [p for p in usable if p.input != SYNTHETIC_INPUT]
    return [w for w in (_noisy_warning(usable), _falling_rate_warning(pipeline)) if w]


def quality_warnings(points: Sequence[Point], fit: WorkloadFit | None, cpu_cost: bool = False) -> list[str]:
    """Plain-words warnings about the measurements themselves, each derived from the figures.
    `cpu_cost`: the fit already took each window's CPU cost out (`--cpu-cost`), so no warning says so."""
    usable = [p for p in points if p.usable]
    pipeline = [p for p in usable if p.input != SYNTHETIC_INPUT]
    alone = [p for p in usable if p.input == SYNTHETIC_INPUT]
    warnings = (
        _noisy_warning(usable),
        _falling_rate_warning(pipeline),
        _understated_ceiling_warning(alone, pipeline),
        None if cpu_cost else _cpu_cost_warning(usable),
        _rough_model_warning(fit),
    )
    return [w for w in warnings if w]


def _cpu_cost_spread(points: Sequence[Point]) -> tuple[int, float, float] | None:
    """The vCPU count whose CPU-bound windows differ most in CPU time per sample, with the least and
    the most, where they differ by more than CPU_COST_SPREAD; None otherwise."""
    by_vcpus: dict[int, list[float]] = {}
    for p in points:
        speed = window_cpu_speed(p)
        if (p.cpu_util_per_vcpu or 0.0) >= BUSY_CPU_UTIL and speed:
            by_vcpus.setdefault(p.vcpus, []).append(1000.0 / speed)
    spreads = [(max(v) / min(v), n, min(v), max(v)) for n, v in by_vcpus.items() if len(v) > 1]
    if not spreads:
        return None
    ratio, vcpus, low, high = max(spreads)
    return (vcpus, low, high) if ratio - 1 > CPU_COST_SPREAD else None
