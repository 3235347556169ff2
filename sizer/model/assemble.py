"""A workload's fit put together: every parameter with its value, interval and origin, the in-sample
and leave-one-out predictions, and the notes on what could not be told."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sizer.model.equations import PARAM_NAMES, binding_terms, throughput_terms
from sizer.model.measured import GroupMeasurements, positive_median
from sizer.model.problem import FitProblem, Intervals, ape_stats, intervals
from sizer.model.types import Param, WorkloadFit
from sizer.points import Point


@dataclass
class FittedTerms:
    """What the fit settled: parameter values in the measured units, which keys were free, and the
    problem and final least-squares result behind them (solved in units of `scale`)."""

    values: dict[str, float]
    free: set[str] = field(default_factory=set)
    problem: FitProblem | None = None
    result: Any = None
    scale: float = 1.0
    loo_preds: list[float] | None = None  # each real point's leave-one-out prediction
    kind: str = "min"  # "min" or "softmin"


@dataclass
class _Params:
    """Builds the fit's parameters from the fitted values, intervals and notes on fixed keys."""

    values: dict[str, float]
    intervals: Intervals
    fixed_notes: dict[str, str]
    params: dict[str, Param]
    one_sided: dict[str, str] = field(default_factory=dict)  # fixed keys that are only a bound

    def add(self, key: str, unit: str, source: str, note: str = "", low: float | None = None,
            high: float | None = None, identifiable: bool = True) -> None:
        public = PARAM_NAMES[key]
        self.params[public] = Param(public, float(self.values[key]), low, high, unit, source, identifiable, note)

    def fitted(self, key: str, unit: str) -> None:
        low, high = self.intervals.get(key, (None, None))
        identifiable = low is not None
        self.add(key, unit, "fit", "" if identifiable else "interval not identifiable from these points",
                 low, high, identifiable)

    def fixed(self, key: str, unit: str, default_note: str) -> None:
        self.add(key, unit, "fixed", self.fixed_notes.get(key, default_note), identifiable=False)
        self.params[PARAM_NAMES[key]].bound = self.one_sided.get(key, "")

    def fitted_or_fixed(self, key: str, unit: str, free: set[str], default_note: str) -> None:
        if key in free:
            self.fitted(key, unit)
        else:
            self.fixed(key, unit, default_note)


def assemble(measured: GroupMeasurements, fitted: FittedTerms, dataset_gib: float | None) -> WorkloadFit:
    """The WorkloadFit of a group from its measurements and what the fit settled; `dataset_gib` is
    the real dataset size stated for the prediction (None: as measured)."""
    fixed_notes = fitted.problem.fixed_notes if fitted.problem is not None else {}
    one_sided = fitted.problem.one_sided if fitted.problem is not None else {}
    built = _Params(fitted.values, _scaled_intervals(fitted), fixed_notes, measured.params, one_sided)
    _add_ceiling(built, measured, fitted.free)
    for key, unit in (("c", f"{measured.unit}/vCPU"), ("s", ""), ("k", "")):
        built.fitted_or_fixed(key, unit, fitted.free, "not identifiable")
    _add_bytes_per_sample(built, measured, fitted.free)
    _add_footprint(built, measured, fitted.free)
    _add_dataset(built, measured, fitted.free, dataset_gib)
    if "p" in fitted.free:
        built.fitted("p", "")
        built.params["knee_sharpness"].note = "p of the smooth minimum (X = sum(term^-p)^(-1/p)); larger is sharper"
    loo_pairs: list[tuple[Point, float]] = []
    loo_median = loo_max = None
    if fitted.loo_preds is not None:
        loo_pairs = list(zip(measured.real, fitted.loo_preds))
        loo_median, loo_max = ape_stats(fitted.loo_preds, measured.throughputs())
    usable = measured.usable
    gpu_models = Counter(p.gpu_model for p in usable if p.gpu_model)
    return WorkloadFit(
        workload=measured.name,
        unit=measured.unit,
        params=built.params,
        n_points=len(usable),
        loo_median_ape=loo_median,
        loo_max_ape=loo_max,
        residuals=_in_sample(measured, fitted.values, built.params),
        calibration_ips=measured.calibration_ips,
        model=fitted.kind,
        loo=loo_pairs,
        gpu_model=gpu_models.most_common(1)[0][0] if gpu_models else "",
        gpu_memory_gib=positive_median(p.gpu_mem_peak_gib for p in usable),
        notes=measured.notes,
        uses_gpu=any(p.gpu_util_pct is not None for p in usable),
    )


def _scaled_intervals(fitted: FittedTerms) -> Intervals:
    """The final result's intervals in the measured units (rates times the scale, bytes divided)."""
    if fitted.result is None or fitted.problem is None:
        return {}
    out = intervals(fitted.result, fitted.problem.specs)
    for key, factor in (("G", fitted.scale), ("c", fitted.scale), ("b", 1.0 / fitted.scale)):
        low, high = out.get(key, (None, None))
        if low is not None and high is not None:
            out[key] = (low * factor, high * factor)
    return out


def _add_ceiling(built: _Params, measured: GroupMeasurements, free: set[str]) -> None:
    """The GPU ceiling: measured by synthetic-input points where there are some, else fitted or fixed."""
    if not measured.gpu_ceiling:
        built.fitted_or_fixed("G", measured.unit, free, "not identifiable")
        return
    tps = [p.throughput for p in measured.synthetic]
    spreads = [p.spread or 0.0 for p in measured.synthetic]
    low = min(t * (1 - s / 2) for t, s in zip(tps, spreads))
    high = max(t * (1 + s / 2) for t, s in zip(tps, spreads))
    # One point without a spread: no interval to give.
    interval = (None, None) if high - low <= 1e-9 * max(abs(high), 1.0) else (low, high)
    note = f"{len(tps)} synthetic-input point(s) (input already on the device)"
    if built.values["G"] > measured.gpu_ceiling * (1 + 1e-9):
        # A real shape ran faster than the GPU alone: the ceiling is that shape's level.
        best = max(measured.real, key=lambda p: p.throughput)
        note = (f"the best measured shape, {best.shape_label()}, above the {measured.gpu_ceiling:,.4g} of "
                f"{len(tps)} synthetic-input point(s): a ceiling never lies below a measurement")
        interval = (None, None)
    built.add("G", measured.unit, "measured", note, *interval)
    gap = _ceiling_gap_note(built.values, measured, max(spreads))
    if gap:
        measured.notes.append(gap)


def _ceiling_gap_note(values: dict[str, float], measured: GroupMeasurements, spread: float) -> str | None:
    """A note where the shapes the fit calls GPU-bound ran clearly off the measured ceiling."""
    if not measured.real:
        return None
    at_gpu = binding_terms(values, *measured.shapes()) == "gpu"
    if not at_gpu.any():
        return None
    at_ceiling = [p.throughput for p, is_gpu in zip(measured.real, at_gpu) if is_gpu]
    ratio = statistics.median(at_ceiling) / values["G"]
    if abs(ratio - 1) <= max(0.03, 2 * spread):
        return None
    return (f"the {int(np.sum(at_gpu))} GPU-bound shape(s) ran at {ratio:.0%} of the synthetic-input ceiling: "
            "the input pipeline costs the GPU time, or the ceiling point was noisy")


def _add_bytes_per_sample(built: _Params, measured: GroupMeasurements, free: set[str]) -> None:
    if not measured.bytes_per_sample:
        built.fitted_or_fixed("b", "MB", free, "no disk-class points and no read-bytes measurement: "
                                               "the disk is not modelled")
        return
    reads = [p.read_mb_per_sample for p in measured.real if p.read_mb_per_sample]
    low, high = (min(reads), max(reads)) if max(reads) > min(reads) else (None, None)
    built.add("b", "MB", "measured", f"median read per sample over {len(reads)} point(s)", low, high)


def _add_footprint(built: _Params, measured: GroupMeasurements, free: set[str]) -> None:
    footprint = measured.footprint_gib
    if footprint is None or built.values["F"] != footprint:
        built.fitted_or_fixed("F", "GiB", free, "footprint not measured: set to 0")
        return
    peaks = [p.footprint_gib for p in measured.real if p.footprint_gib]
    spread = bool(peaks) and max(peaks) > min(peaks)
    built.add("F", "GiB", "measured", "peak resident memory of the workload" if peaks else
              "at least the largest RAM limit that ran out of memory",
              min(peaks) if spread else None, max(peaks) if spread else None)


def _add_dataset(built: _Params, measured: GroupMeasurements, free: set[str], dataset_gib: float | None) -> None:
    """`measured_dataset_gib`, the size the points were measured with (where known), and
    `dataset_gib`, the size predictions use: the stated real one, else the measured one."""
    measured_param = _measured_dataset(built, measured, free)
    params = built.params
    if measured_param is not None:
        params["measured_dataset_gib"] = measured_param
    measured_d = measured_param.value if measured_param is not None else None
    if dataset_gib is not None and measured_d:
        params["dataset_gib"] = Param("dataset_gib", float(dataset_gib), None, None, "GiB", "fixed",
                                      note=f"stated real dataset; RAM axis rescaled from {measured_d:.3g} GiB measured")
    elif measured_d and measured_param is not None:
        params["dataset_gib"] = Param("dataset_gib", float(measured_d), measured_param.low, measured_param.high,
                                      "GiB", measured_param.source,
                                      note="dataset as measured (pass --dataset-gib for the real one)")
    else:
        params["dataset_gib"] = Param("dataset_gib", 0.0, None, None, "GiB", "fixed", False,
                                      built.fixed_notes.get("D", "dataset size unknown: the RAM effect is not modelled"))
        if dataset_gib is not None:
            measured.notes.append("--dataset-gib ignored: the measured dataset size is unknown, so the RAM axis "
                                  "cannot be rescaled")


def _measured_dataset(built: _Params, measured: GroupMeasurements, free: set[str]) -> Param | None:
    """The dataset size of the sweep: measured, fitted from the RAM levels, or held where the fit set it."""
    name, value = "measured_dataset_gib", float(built.values["D"])
    if measured.dataset_gib is not None:
        return Param(name, measured.dataset_gib, None, None, "GiB", "measured", note="dataset size used in the sweep")
    if "D" in free:
        low, high = built.intervals.get("D", (None, None))
        return Param(name, value, low, high, "GiB", "fit", low is not None, "fitted from the RAM levels")
    if value > 0:
        return Param(name, value, None, None, "GiB", "fixed", False, built.fixed_notes.get("D", "not identifiable"))
    return None


def _in_sample(measured: GroupMeasurements, values: dict[str, float],
               params: dict[str, Param]) -> list[tuple[Point, float]]:
    """Each real point with the fit's prediction of it, on the dataset size it was measured with."""
    if not measured.real:
        return []
    measured_dataset = params.get("measured_dataset_gib")
    in_sample = dict(values, D=measured_dataset.value if measured_dataset is not None else values["D"])
    x, _ = throughput_terms(in_sample, *measured.shapes())
    return [(p, float(xi)) for p, xi in zip(measured.real, x)]
