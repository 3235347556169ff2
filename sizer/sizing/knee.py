"""The vCPU knee: the fewest vCPUs that keep a workload within tolerance of its ceiling, as measured
(per decode mode) and as the model predicts it, with its range over the host speeds the sweep saw.

The knee range is open above (`beyond_measured`) where the measurements do not settle it: the
plateau was not reached at any measured count, or first at a count so close to the highest measured
one that no measured count has the vCPUs a host at the range's pessimistic speed would need (the
knee divided by that speed) and reaches the plateau; or the model's pessimistic knee itself lies
beyond the highest measured count. The knee may then lie anywhere above that count."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from sizer.model import WorkloadFit, meets_tolerance, tolerance_target
from sizer.model.uncertainty import FitDraws, knee_range
from sizer.points import Point
from sizer.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT

# The knee is sought up to this many vCPUs at least, and to four times the most measured.
MIN_SEARCH_VCPUS = 64
SEARCH_FACTOR = 4


def predict_throughput(fit: WorkloadFit, vcpus: float, ram_gib: float, disk_mbps: float | None,
                       cpu_scale: float = 1.0) -> float | None:
    """The fit's throughput at a shape (its CPU term x `cpu_scale`: another host's CPU); None where
    the model has no finite answer."""
    try:
        value = fit.predict(vcpus, ram_gib, disk_mbps, cpu_scale=cpu_scale).throughput
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return finite_number(value)


def fit_ceiling(fit: WorkloadFit) -> float | None:
    """The fit's ceiling, or None where it has no finite one."""
    return finite_number(fit.value("gpu_ceiling"))


def disk_order(name: str) -> tuple[int, str]:
    """Fastest canonical disk class first, other classes after them by name."""
    order = {"local-nvme": 0, "ssd": 1, "standard": 2}
    return (order.get(name, 3), name)


def measured_disk_classes(points: Sequence[Point]) -> list[str]:
    return sorted({p.disk_class for p in points}, key=disk_order)


# ---------------------------------------------------------------------------- measured
@dataclass(frozen=True)
class LevelRate:
    vcpus: int
    throughput: float


@dataclass(frozen=True)
class MeasuredKnee:
    """One decode mode's knee as measured: the fewest measured vCPUs within tolerance of the ceiling
    (None: no measured count reaches it), and the best measured share of the ceiling."""

    decode: str
    ceiling: float
    ceiling_source: str
    bound: float
    knee_vcpus: int | None
    knee_throughput: float | None
    best_vcpus: int
    best_throughput: float
    best_fraction: float | None
    measured_vcpus: tuple[int, ...]
    by_vcpus: tuple[LevelRate, ...]

    def settled_at(self, speed: float) -> bool:
        """Whether the measurements settle this knee at a host `speed` times as fast (at most 1): a
        measured count with at least the knee's vCPUs divided by that speed reaches the plateau."""
        if self.knee_vcpus is None:
            return False
        needed = self.knee_vcpus / min(max(speed, 1e-9), 1.0)
        return any(r.vcpus >= needed - 1e-9 and r.throughput >= self.bound for r in self.by_vcpus)


def _best_by_vcpus(points: Sequence[Point], decode: str) -> dict[int, Point]:
    """Per vCPU count, the fastest point of one decode mode over disk classes and RAM sizes."""
    best: dict[int, Point] = {}
    for p in points:
        if p.decode == decode and (p.vcpus not in best or p.throughput > best[p.vcpus].throughput):
            best[p.vcpus] = p
    return best


def _measured_knee(decode: str, best: dict[int, Point], ceiling: float | None, tolerance: float,
                   ceiling_name: str) -> MeasuredKnee:
    top = max(best.values(), key=lambda p: p.throughput)
    reference = ceiling or top.throughput
    bound = tolerance_target(reference, tolerance)
    knee = next((v for v in sorted(best) if best[v].throughput >= bound), None)
    return MeasuredKnee(
        decode=decode, ceiling=reference, ceiling_source=f"the {ceiling_name}" if ceiling else "best measured rate",
        bound=bound, knee_vcpus=knee, knee_throughput=best[knee].throughput if knee is not None else None,
        best_vcpus=top.vcpus, best_throughput=top.throughput,
        best_fraction=top.throughput / reference if reference else None, measured_vcpus=tuple(sorted(best)),
        by_vcpus=tuple(LevelRate(v, best[v].throughput) for v in sorted(best)))


def measured_knees(points: Sequence[Point], ceiling: float | None, tolerance: float,
                   ceiling_name: str = "ceiling") -> list[MeasuredKnee]:
    """Fewest measured vCPUs within `tolerance` of the ceiling, per decode mode.

    `ceiling_name` is what the fit calls its ceiling ("GPU ceiling" only where it was measured with
    input on the device), so the knee's sentence says which one it is. For each vCPU count the best
    measured rate over disk classes and RAM sizes is taken (the knee is about vCPUs; disk and RAM
    have their own answer)."""
    # Synthetic-input points measure the GPU alone, not the input pipeline the knee is about.
    usable = [p for p in points if p.usable and p.input != SYNTHETIC_INPUT]
    out = []
    for decode in sorted({p.decode for p in usable}):
        best = _best_by_vcpus(usable, decode)
        if best:
            out.append(_measured_knee(decode, best, ceiling, tolerance, ceiling_name))
    return out


# ---------------------------------------------------------------------------- predicted
@dataclass(frozen=True)
class KneeInputs:
    """Where the model's vCPU knee is sought: each measured disk class's read rate as the fit gives it
    (MB/s; None: unthrottled), the fastest of them, twice the RAM the workload could want, and the
    most vCPUs measured (the search goes to SEARCH_FACTOR times that, at least MIN_SEARCH_VCPUS)."""

    disks: dict[str, float | None]
    fastest_mbps: float | None
    ram_high: float
    vcpus_max: int

    @property
    def search_top(self) -> int:
        return max(self.vcpus_max * SEARCH_FACTOR, MIN_SEARCH_VCPUS)


def knee_inputs(points: Sequence[Point], fit: WorkloadFit, dataset_gib: float | None = None) -> KneeInputs:
    """The knee's inputs (`KneeInputs`) for a fit of `points` (`dataset_gib`: a stated dataset size)."""
    usable = [p for p in points if p.usable]
    disks = {d: fit.disk_mbps(d) for d in measured_disk_classes(points)}
    fastest = max(disks.values(), key=lambda m: math.inf if m is None else m) if disks else None
    max_ram = max((p.ram_gib for p in usable), default=1.0)
    footprint = finite_number(fit.value("footprint_gib")) or 0.0
    v_max = max((p.vcpus for p in usable), default=1)
    return KneeInputs(disks, fastest, max(max_ram, (dataset_gib or 0.0) + footprint) * 2, v_max)


def predicted_knee(fit: WorkloadFit, ceiling: float | None, tolerance: float, at: KneeInputs,
                   cpu_scale: float = 1.0) -> int | None:
    """Fewest vCPUs the model predicts within `tolerance` of the ceiling (ample RAM, fastest disk;
    the CPU term x `cpu_scale` for another host's CPU)."""
    if not ceiling:
        return None
    for v in range(1, at.search_top + 1):
        x = predict_throughput(fit, v, at.ram_high, at.fastest_mbps, cpu_scale)
        if x is not None and meets_tolerance(x, ceiling, tolerance):
            return v
    return None


# ---------------------------------------------------------------------------- the range
@dataclass(frozen=True)
class KneeRangeSummary:
    """The model's knee at the optimistic (`low`) and the pessimistic (`high`) end of the host speeds
    (None: not reached by `searched_up_to`), the factors on the CPU term those ends stand for, the
    model's own error added to both, and whether the range is open above (see the module)."""

    low: int | None
    high: int | None
    confidence: float
    searched_up_to: int
    cpu_speed_low: float | None
    cpu_speed_high: float | None
    model_error: float | None
    host_timeline: bool
    measured_up_to: int | None
    beyond_measured: bool
    open_reason: str | None


def knee_range_summary(fit: WorkloadFit, draws: FitDraws, tolerance: float, confidence: float, at: KneeInputs,
                       measured: Sequence[MeasuredKnee] = (), cpu_scale: float = 1.0) -> KneeRangeSummary:
    """The knee's range at `confidence` (`sizer.model.uncertainty.knee_range`; the CPU term x
    `cpu_scale` for another host's CPU) and whether the measurements settle it (`measured`: each
    decode mode's measured knee)."""
    knee = knee_range(fit, draws, tolerance, confidence, at.ram_high, at.fastest_mbps, at.search_top, cpu_scale)
    factors = sorted((knee.pessimistic, knee.optimistic))
    top = max((v for row in measured for v in row.measured_vcpus), default=None)
    reason = open_reason(knee.high, top, measured, factors[0])
    return KneeRangeSummary(
        low=knee.low, high=knee.high, confidence=confidence, searched_up_to=at.search_top,
        cpu_speed_low=significant(factors[0], 3), cpu_speed_high=None if draws.cpu_open else significant(factors[1], 3),
        model_error=significant(knee.model_error, 3), host_timeline=draws.host is not None, measured_up_to=top,
        beyond_measured=reason is not None, open_reason=reason)


def open_reason(high: int | None, top: int | None, measured: Sequence[MeasuredKnee], speed: float) -> str | None:
    """Why the knee range is open above (see the module), in words; None where it is not."""
    if top is None:
        return None
    if any(row.knee_vcpus is None for row in measured):
        return f"the measurements did not reach the plateau by {top} vCPUs"
    unsettled = [row for row in measured if not row.settled_at(speed)]
    if unsettled:
        knee = max(row.knee_vcpus or 0 for row in unsettled)
        if knee >= top:
            return (f"the measurements first reach the plateau at their highest count, {top} vCPUs: a host "
                    f"{1 - speed:.0%} slower would need more")
        return (f"the measurements reach the plateau at {knee} vCPUs, but a host {1 - speed:.0%} slower would need "
                f"{knee / speed:.3g}, and no measured count from there shows the plateau")
    if high is None or high > top:
        return f"the model's pessimistic knee lies beyond the highest measured count ({top} vCPUs)"
    return None
