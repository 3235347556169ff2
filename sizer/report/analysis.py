"""What the report derives from points and a fit: the vCPU knee, RAM needs, out-of-memory bounds
and plain-words warnings about the measurements. Pure functions of their arguments."""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from sizer.points import Point
from sizer.report.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT

NOISY_RATE_DROP = 0.10  # a rate that falls by more than this with more vCPUs says the host was busy
ROUGH_MODEL_APE = 0.10  # a leave-one-out median error above this makes predictions rough
NOISY_POINTS_WARNED = 2  # the fewest noisy points of a workload that make a warning
# CPU-bound windows at one vCPU count whose CPU time per sample differs by more than this ran at
# different speeds of the host (3.3 against 4.9 ms an image at 2 vCPUs on one measured host).
CPU_COST_SPREAD = 0.20


# ---------------------------------------------------------------------------- model access
def predict_throughput(fit: Any, vcpus: float, ram_gib: float, disk_mbps: float | None) -> float | None:
    """The fit's throughput at a shape; None where the model has no finite answer."""
    try:
        value = fit.predict(vcpus, ram_gib, disk_mbps).throughput
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return finite_number(value)


def fit_ceiling(fit: Any) -> float | None:
    """The fit's GPU ceiling parameter, or None where it has none."""
    param = fit.params.get("gpu_ceiling")
    return finite_number(param.value) if param is not None else None


# ---------------------------------------------------------------------------- the vCPU knee
def _best_by_vcpus(points: Sequence[Point], decode: str) -> dict[int, Point]:
    """Per vCPU count, the fastest point of one decode mode over disk classes and RAM sizes."""
    best: dict[int, Point] = {}
    for p in points:
        if p.decode == decode and (p.vcpus not in best or p.throughput > best[p.vcpus].throughput):
            best[p.vcpus] = p
    return best


def _knee_row(decode: str, best: dict[int, Point], ceiling: float | None, tolerance: float,
              ceiling_name: str) -> dict[str, Any]:
    from sizer.model import tolerance_target

    top = max(best.values(), key=lambda p: p.throughput)
    reference = ceiling or top.throughput
    bound = tolerance_target(reference, tolerance)
    knee = next((v for v in sorted(best) if best[v].throughput >= bound), None)
    return {
        "decode": decode,
        "ceiling": reference,
        "ceiling_source": f"the {ceiling_name}" if ceiling else "best measured rate",
        "bound": bound,
        "knee_vcpus": knee,
        "knee_throughput": best[knee].throughput if knee is not None else None,
        "best_vcpus": top.vcpus,
        "best_throughput": top.throughput,
        "best_fraction": top.throughput / reference if reference else None,
        "measured_vcpus": sorted(best),
        "by_vcpus": [{"vcpus": v, "throughput": best[v].throughput} for v in sorted(best)],
    }


def vcpu_knee(points: Sequence[Point], ceiling: float | None, tolerance: float,
              ceiling_name: str = "ceiling") -> list[dict[str, Any]]:
    """Fewest measured vCPUs within `tolerance` of the ceiling, per decode mode.

    `ceiling_name` is what the fit calls its ceiling ("GPU ceiling" only where it was measured with
    input on the device), so the knee's sentence says which one it is.

    For each vCPU count the best measured rate over disk classes and RAM sizes is taken (the knee
    is about vCPUs; disk and RAM have their own answer). `knee_vcpus` is None when no measured
    count reaches the bound; the best measured share of the ceiling says how close it came.
    """
    # Synthetic-input points measure the GPU alone, not the input pipeline the knee is about.
    usable = [p for p in points if p.usable and p.input != SYNTHETIC_INPUT]
    out = []
    for decode in sorted({p.decode for p in usable}):
        best = _best_by_vcpus(usable, decode)
        if best:
            out.append(_knee_row(decode, best, ceiling, tolerance, ceiling_name))
    return out


def predicted_knee(fit: Any, ceiling: float | None, tolerance: float, ram_gib: float, disk_mbps: float | None,
                   max_vcpus: int) -> int | None:
    """Fewest vCPUs the model predicts within `tolerance` of the ceiling (ample RAM, fastest disk)."""
    from sizer.model import meets_tolerance

    if not ceiling:
        return None
    for v in range(1, max_vcpus + 1):
        x = predict_throughput(fit, v, ram_gib, disk_mbps)
        if x is not None and meets_tolerance(x, ceiling, tolerance):
            return v
    return None


# ---------------------------------------------------------------------------- RAM
def _ram_grid(low: float, high: float) -> list[float]:
    """RAM sizes from `low` to `high` in about 200 steps of a multiple of 0.25 GiB."""
    step = max(0.25, round((high - low) / 200 / 0.25) * 0.25)
    grid, r = [], max(step, low)
    while r <= high + 1e-9:
        grid.append(round(r, 2))
        r += step
    return grid


def out_of_memory(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Per RAM size, the fewest vCPUs at which a measured shape was killed by the memory limit: a
    measured bound beside the model's single footprint (loader workers each add to it)."""
    least: dict[float, int] = {}
    for p in points:
        if p.status == "oom":
            least[p.ram_gib] = min(least.get(p.ram_gib, p.vcpus), p.vcpus)
    return [{"ram_gib": ram, "from_vcpus": least[ram]} for ram in sorted(least)]


def _least_ram(fit: Any, ceiling: float, tolerance: float, vcpus: int, disk_mbps: float | None,
               grid: list[float]) -> float | None:
    from sizer.model import meets_tolerance

    for r in grid:
        x = predict_throughput(fit, vcpus, r, disk_mbps)
        if x is not None and meets_tolerance(x, ceiling, tolerance):
            return r
    return None


def ram_needs(fit: Any, ceiling: float | None, tolerance: float, vcpus: int, disks: dict[str, float | None],
              ram_high: float) -> list[dict[str, Any]]:
    """Per disk class, the least RAM (GiB) at which the model keeps the workload within tolerance."""
    if not ceiling:
        return []
    out = []
    grid = _ram_grid(0.0, ram_high)
    for name, mbps in disks.items():
        at_high = predict_throughput(fit, vcpus, ram_high, mbps)
        out.append(
            {
                "disk_class": name,
                "disk_mbps": mbps,
                "min_ram_gib": _least_ram(fit, ceiling, tolerance, vcpus, mbps, grid),
                "predicted_at_max_ram": significant(at_high, 6),
                "fraction_at_max_ram": significant(at_high / ceiling, 4) if at_high is not None else None,
                "searched_up_to_gib": ram_high,
            }
        )
    return out


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


def _rough_model_warning(fit: Any) -> str | None:
    loo = finite_number(getattr(fit, "loo_median_ape", None)) if fit is not None else None
    if loo is None or loo <= ROUGH_MODEL_APE:
        return None
    return f"The model misses held-out points by a median {loo:.0%}: its predictions for unmeasured shapes are rough."


def busy_host_signs(points: Sequence[Point]) -> list[str]:
    """The warnings that speak of the host rather than the model: noisy points and rates that fall
    with more vCPUs. Only these raise the report's "busy or unstable host" notice."""
    usable = [p for p in points if p.usable]
    pipeline = [p for p in usable if p.input != SYNTHETIC_INPUT]
    return [w for w in (_noisy_warning(usable), _falling_rate_warning(pipeline)) if w]


def quality_warnings(points: Sequence[Point], fit: Any, cpu_cost: bool = False) -> list[str]:
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
    from sizer.model import BUSY_CPU_UTIL, window_cpu_speed

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
