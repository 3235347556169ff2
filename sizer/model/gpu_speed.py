"""A workload's GPU ceiling on GPUs nobody measured, from the one that was.

The measured ceiling's time per sample is split into shares (`TimeSplit`): tensor-core work at its
roofline, memory-bound work at its roofline, the rest of the kernels' time, and time with no
kernel running (launch and host latency). Each share is scaled by the target GPU's figures against
the source's (sizer.gpu_table), as Habitat (Yu et al., ATC'21) scales each kernel: memory-bound
work by memory bandwidth, work bound by neither by SMs x clock, latency not at all. Tensor-core
work is scaled per intensity bin of its operators (FLOPs per byte, workloads.op_costs) by the
ratio of roofline times, max(FLOPs / tensor rate, bytes / bandwidth), on the two GPUs: a
convolution below a GPU's ridge point runs at its bandwidth, not at its tensor cores' rate. A
kernel that takes longer than its roofline (ResNet-50's batch-norm kernels stream at about a third
of an H200's bandwidth) only moves by the roofline for that part; the rest is counted as neither.

The split comes from a measurement or from an analytic count, never from a constant:
- `measured_split`: the kernel seconds a profiled ceiling point recorded (counter
  `gpu_kernel_split`, workloads.kernel_split) against its measured ceiling, with its operator
  costs for the roofline part;
- `analytic_split`: the operator costs of one step counted on fake tensors
  (workloads.fake_step.analytic_costs), its kernels at a stated share of their roofline.

Every prediction carries a range: the lowest and highest of the same scaling under the other
defensible readings (a roofline that adds compute and memory time instead of taking the larger;
the rest scaled by bandwidth instead of SMs x clock; with no operator intensities, tensor work at
the tensor rate or at the bandwidth; for an analytic split, kernels at any efficiency in its
span), applied to the measured ceiling's own range. On the source GPU every reading gives the
measurement itself. Pure: no torch, no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sizer.gpu_table import GpuSpec, GpuTable
from sizer.model.types import Param, WorkloadFit
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT

MEASURED, ANALYTIC = "measured", "analytic"
SPLIT_KEY = "gpu_kernel_split"  # the counter a profiled ceiling point records (`Point.kernel_split`)
# An analytic split cannot know how close its kernels come to their roofline. Profiled on an H200,
# ResNet-50's kernels reached 36-54% of it (bf16 training and inference, batch 256; the LSTM's far
# less): an analytic split spans kernels at 1/SPAN to all of their roofline, its point reading at
# the geometric middle, 1/sqrt(SPAN).
ANALYTIC_EFFICIENCY_SPAN = 2.0


@dataclass(frozen=True)
class TimeSplit:
    """Shares of a sample's time on the GPU that measured the ceiling (they sum to 1), with the
    tensor operators' (FLOPs, bytes) per sample by intensity bin (empty: not known)."""

    method: str  # MEASURED or ANALYTIC
    precision: str  # "bf16", "fp16" or "fp32": the rate of its matrix work
    tensor: float
    memory: float
    other: float
    latency: float
    tensor_ops: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        shares = (self.tensor, self.memory, self.other, self.latency)
        if any(s < 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-6:
            raise ValueError(f"time shares must be >= 0 and sum to 1, got {shares}")

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "precision": self.precision, "tensor": self.tensor, "memory": self.memory,
                "other": self.other, "latency": self.latency}


@dataclass(frozen=True)
class PredictedCeiling:
    gpu: str
    value: float
    low: float
    high: float
    source_gpu: str
    method: str  # the split's: MEASURED or ANALYTIC
    time_ratio: float  # target time per sample over the source's (point reading)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _tensor_ops(record: dict[str, Any] | None) -> tuple[tuple[float, float], ...]:
    rows = (record or {}).get("tensor") or []
    return tuple((float(f), float(b)) for f, b in rows if float(f) > 0 and float(b) > 0)


def _roofline(flops: float, nbytes: float, gpu: GpuSpec, precision: str, additive: bool = False) -> float:
    compute = flops / (gpu.matrix_tflops(precision)[0] * 1e12)
    memory = nbytes / gpu.memory_bandwidth
    return compute + memory if additive else max(compute, memory)


def _roofs(record: dict[str, Any] | None, source: GpuSpec, precision: str) -> tuple[float, float] | None:
    """Roofline seconds per sample of an operator-cost record on `source`: its tensor operators'
    and its memory-bound operators'; None without a record."""
    if not record:
        return None
    tensor = sum(_roofline(f, b, source, precision) for f, b in _tensor_ops(record))
    return tensor, float(record.get("memory_bytes") or 0.0) / source.memory_bandwidth


def measured_split(record: dict[str, Any], ceiling: float, source: GpuSpec) -> TimeSplit:
    """The split of a profiled ceiling point on `source`: its kernel seconds per sample by class
    against the measured time per sample (1 / `ceiling`); the time no kernel ran is latency.

    A class's kernels run at most at their roofline (the operator costs the point recorded, on the
    source's rates): that part scales with the roofline, and what they took beyond it (waves,
    launches, reductions that do not stream at full bandwidth) is counted with the other kernels,
    which scale with SMs x clock. Without operator costs a class scales whole. Kernels that took
    longer than the measured time (the profiled steps ran slower) are taken as the whole."""
    samples = float(record.get("samples") or 0)
    if samples <= 0 or ceiling <= 0:
        raise ValueError("a measured split needs the profiled samples and a ceiling > 0")
    seconds = {c: float(record.get(f"{c}_s") or 0.0) / samples for c in ("tensor", "memory", "other")}
    busy = sum(seconds.values())
    if busy <= 0:
        raise ValueError("the profiled steps ran no kernel")
    precision = str(record.get("precision") or "fp32")
    roofs = _roofs(record.get("op_costs"), source, precision)
    tensor, memory = seconds["tensor"], seconds["memory"]
    if roofs is not None:
        tensor, memory = min(tensor, roofs[0]), min(memory, roofs[1])
    other = busy - tensor - memory
    whole = max(busy, 1.0 / ceiling)
    return TimeSplit(MEASURED, precision, tensor / whole, memory / whole, other / whole, 1.0 - busy / whole,
                     _tensor_ops(record.get("op_costs")))


def analytic_split(record: dict[str, Any], source: GpuSpec, efficiency: float = 1.0) -> TimeSplit:
    """The split of an operator-cost record (workloads.fake_step.analytic_costs) on `source`, its
    kernels at `efficiency` of their roofline: the roofline part of each operator scales with the
    roofline, the rest (1 / efficiency - 1 of it) with SMs x clock, as a measured split's does;
    no latency."""
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    precision = str(record.get("precision") or "fp32")
    roofs = _roofs(record, source, precision)
    tensor, memory = roofs if roofs is not None else (0.0, 0.0)
    total = (tensor + memory) / efficiency
    if total <= 0:
        raise ValueError("the operator costs hold no work")
    return TimeSplit(ANALYTIC, precision, tensor / total, memory / total, 1.0 - (tensor + memory) / total, 0.0,
                     _tensor_ops(record))


@dataclass(frozen=True)
class _Reading:
    """One way of scaling the shares: how tensor operators' time moves and what other kernels
    scale with."""

    additive_roofline: bool = False
    other_by_bandwidth: bool = False
    tensor_without_ops: str = "compute"  # with no operator intensities: "compute" or "bandwidth"


POINT = _Reading()
_ALTERNATIVES = (_Reading(additive_roofline=True), _Reading(other_by_bandwidth=True),
                 _Reading(tensor_without_ops="bandwidth"))


def _tensor_factor(split: TimeSplit, source: GpuSpec, target: GpuSpec, reading: _Reading) -> float:
    """How the tensor share's time moves from source to target: its operator bins' roofline
    times on the target over those on the source, weighted by their time on the source."""
    bandwidth = source.memory_bandwidth / target.memory_bandwidth
    compute = source.matrix_tflops(split.precision)[0] / target.matrix_tflops(split.precision)[0]
    if not split.tensor_ops:
        return compute if reading.tensor_without_ops == "compute" else bandwidth
    before = [_roofline(f, b, source, split.precision, reading.additive_roofline) for f, b in split.tensor_ops]
    after = [_roofline(f, b, target, split.precision, reading.additive_roofline) for f, b in split.tensor_ops]
    return sum(after) / sum(before)


def time_ratio(split: TimeSplit, source: GpuSpec, target: GpuSpec, reading: _Reading = POINT) -> float:
    """Time per sample on `target` over time per sample on `source` (1 on the source itself)."""
    bandwidth = source.memory_bandwidth / target.memory_bandwidth
    other = bandwidth if reading.other_by_bandwidth else source.sm_clock / target.sm_clock
    return (split.tensor * _tensor_factor(split, source, target, reading) + split.memory * bandwidth
            + split.other * other + split.latency)


def _ratios(split: TimeSplit, source: GpuSpec, target: GpuSpec,
            alternatives: Sequence[TimeSplit] = ()) -> tuple[float, list[float]]:
    point = time_ratio(split, source, target)
    readings = [time_ratio(split, source, target, r) for r in _ALTERNATIVES]
    readings += [time_ratio(alt, source, target, r) for alt in alternatives for r in (POINT, *_ALTERNATIVES)]
    return point, [point, *readings]


def predict_ceiling(ceiling: float, split: TimeSplit, source: GpuSpec, target: GpuSpec, low: float | None = None,
                    high: float | None = None, alternatives: Sequence[TimeSplit] = ()) -> PredictedCeiling:
    """The ceiling on `target` of a workload whose ceiling on `source` is `ceiling` (range `low`
    to `high`, default the value), with the range of every reading (`alternatives`: other splits
    the evidence allows, such as the analytic one at other efficiencies)."""
    if ceiling <= 0:
        raise ValueError("the measured ceiling must be > 0")
    point, ratios = _ratios(split, source, target, alternatives)
    low_src = ceiling if low is None else min(low, ceiling)
    high_src = ceiling if high is None else max(high, ceiling)
    return PredictedCeiling(gpu=target.gpu, value=ceiling / point, low=low_src / max(ratios), high=high_src / min(ratios),
                            source_gpu=source.gpu, method=split.method, time_ratio=point)


def analytic_splits(record: dict[str, Any], source: GpuSpec) -> tuple[TimeSplit, list[TimeSplit]]:
    """The analytic split's point reading (kernels at 1/sqrt(SPAN) of their roofline) and its
    alternatives (at 1/SPAN and at all of it)."""
    point = analytic_split(record, source, ANALYTIC_EFFICIENCY_SPAN ** -0.5)
    return point, [analytic_split(record, source, 1.0 / ANALYTIC_EFFICIENCY_SPAN), analytic_split(record, source, 1.0)]


def predict_all(ceiling: float, split: TimeSplit, source: GpuSpec, table: GpuTable, low: float | None = None,
                high: float | None = None, alternatives: Sequence[TimeSplit] = ()) -> dict[str, PredictedCeiling]:
    """`predict_ceiling` on every GPU of the table, by name."""
    return {gpu.gpu: predict_ceiling(ceiling, split, source, gpu, low, high, alternatives) for gpu in table}


def fit_for_gpu(fit: WorkloadFit, target_gpu: str, table: GpuTable, split: TimeSplit,
                alternatives: Sequence[TimeSplit] = ()) -> WorkloadFit:
    """A copy of `fit` for `target_gpu`: its gpu_ceiling is the ceiling predicted there from the
    fit's own (source "predicted", with the prediction's range); its GPU model and memory are the
    target's. Everything else (the CPU, RAM and disk terms) is the fit's: the same per-vCPU rate
    feeds the target's ceiling, so a slower GPU needs fewer vCPUs."""
    source = table.get(fit.gpu_model)
    target = table.get(target_gpu)
    measured = fit.params["gpu_ceiling"]
    predicted = predict_ceiling(measured.value, split, source, target, measured.low, measured.high, alternatives)
    params = dict(fit.params)
    params["gpu_ceiling"] = Param(
        name=measured.name, value=predicted.value, low=predicted.low, high=predicted.high, unit=measured.unit,
        source="predicted", identifiable=measured.identifiable,
        note=f"predicted from the {source.gpu}'s {measured.value:,.0f} ({split.method} time split)")
    out = copy.copy(fit)
    out.params = params
    # What a shape measured on the source GPU delivered, the target's ceiling permitting: its CPU and
    # disk feed any GPU alike, so on a slower GPU it reads at most the predicted ceiling.
    out.residuals = [(_capped(p, predicted.value), min(float(y), predicted.value)) for p, y in fit.residuals]
    out.loo = [(_capped(p, predicted.value), min(float(y), predicted.value)) for p, y in fit.loo]
    out.gpu_model = target.gpu
    out.gpu_memory_gib = target.memory_gib
    out.notes = [*fit.notes, f"GPU ceiling predicted for the {target.gpu} from the {source.gpu} "
                 f"({split.method} split: {split.tensor:.0%} tensor, {split.memory:.0%} memory, "
                 f"{split.other:.0%} other, {split.latency:.0%} latency)"]
    out.refit_without = None  # a refit would measure the source GPU again, not this one
    return out


def _capped(point: Point, ceiling: float) -> Point:
    """A measured point seen through another GPU's ceiling (its rate and its passes' at most that)."""
    if point.throughput <= ceiling and all(r <= ceiling for r in point.pass_rates):
        return point
    return dataclasses.replace(point, throughput=min(point.throughput, ceiling),
                               pass_rates=tuple(min(r, ceiling) for r in point.pass_rates))


def split_for(record: dict[str, Any] | None, ceiling: float, source: GpuSpec,
              analytic: Callable[[], dict[str, Any]] | None = None) -> tuple[TimeSplit, list[TimeSplit]]:
    """The split to predict from, with its alternatives: the measured one where the ceiling point
    recorded `gpu_kernel_split`, else the analytic one of `analytic()` (operator costs, e.g.
    `workloads.fake_step.analytic_costs` bound to the workload); ValueError where neither is had."""
    if record:
        return measured_split(record, ceiling, source), []
    if analytic is None:
        raise ValueError("no kernel split was recorded and no analytic count was given")
    return analytic_splits(analytic(), source)


def recorded_split(points: Sequence[Point]) -> dict[str, Any] | None:
    """The kernel split a workload's points carry (`Point.kernel_split`, the point's counter as the
    store reads it): a usable synthetic-input point's first, else any usable point's (the PTB LSTM's
    corpus is on the GPU at every point); None where none was recorded."""
    usable = [p for p in points if p.usable and p.kernel_split]
    usable.sort(key=lambda p: p.input != SYNTHETIC_INPUT)
    split = usable[0].kernel_split if usable else None
    return split if isinstance(split, dict) else None
