"""Fitting the bottleneck model to measured points, one workload variant at a time."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.model.assemble import FittedTerms, assemble
from sizer.model.cpu_cost import cpu_cost_note, take_out_cpu_cost, window_cpu_speed
from sizer.model.grouping import group_points, multi_gpu_groups
from sizer.model.identify import fit_identifiable
from sizer.model.load import measure_load
from sizer.model.measured import GroupMeasurements, measure_group
from sizer.model.problem import FitProblem, ape_stats, leave_one_out, starts, with_sharpness
from sizer.model.scaling import measure_scaling
from sizer.model.types import WorkloadFit
from sizer.points import Point, combine_passes
from sizer.variants import SYNTHETIC_INPUT

# Leave-one-out error needs at least this many real-input points.
_MIN_LOO_POINTS = 3


def fit_points(
    points: list[Point],
    disk_classes: dict[str, DiskClass],
    dataset_gib: float | None = None,
    disk_mbps: dict[str, float] | None = None,
    loo: bool = True,
    smooth: bool | None = None,
    cpu_cost: bool = False,
) -> dict[str, WorkloadFit]:
    """Fit the bottleneck model per workload.

    `dataset_gib` is the real dataset size: the RAM axis is rescaled from the measured dataset to it.
    `disk_mbps` gives fio-measured read bandwidth per disk class (overrides the class cap).
    `smooth`: None chooses between `min` and a smooth minimum by leave-one-out error; True/False forces.
    Workloads without a usable point are left out (nothing can be fitted from failures alone).
    A shape measured several times is fitted once, at its median (`points.combine_passes`).
    `cpu_cost`: each measurement first goes through `take_out_cpu_cost`, and each fit says so.
    The fit is of one-GPU points; a variant's multi-GPU points go into its fit's `scaling`
    (sizer.model.scaling), measured against it.
    """
    if dataset_gib is not None and dataset_gib <= 0:
        raise ValueError("dataset_gib must be > 0")
    scaled: dict[str, list[Point]] = {}
    if cpu_cost:
        if not any(window_cpu_speed(p) for p in points):
            raise SizerError("--cpu-cost needs each window's CPU time per sample, which only a store keeps: "
                             "give --store (a points.csv does not carry it)")
        points = take_out_cpu_cost(points)
        scaled = group_points(points)  # each measurement, before a shape's passes become one point
    fits: dict[str, WorkloadFit] = {}
    combined = combine_passes(points)
    multi_gpu = multi_gpu_groups(combined)
    every = group_points(points)  # each measurement: the interference check's loaded and alone ones apart
    for name, group in group_points(combined).items():
        fit = fit_workload(name, group, disk_classes, dataset_gib, disk_mbps or {}, loo, smooth)
        if fit is None:
            continue
        fit.refit_without = partial(_refit_without, name, group, disk_classes, dataset_gib, disk_mbps or {}, smooth)
        real = [p for p in group if p.usable and p.input != SYNTHETIC_INPUT]
        fit.reads_once = bool(real) and all(_reads_once(p) for p in real)
        fit.scaling = measure_scaling(fit, group, multi_gpu.get(name, []), measure_load(every.get(name, [])))
        if fit.reads_once:
            fit.notes.append("reads each sample once: RAM beyond the workload's footprint cannot lift a "
                             "disk bound (no later pass finds the data in the page cache)")
        if cpu_cost:
            fit.notes.append(cpu_cost_note(scaled.get(name, [])))
        fits[name] = fit
    return fits


def _refit_without(name: str, group: list[Point], disk_classes: dict[str, DiskClass], dataset_gib: float | None,
                   disk_mbps: dict[str, float], smooth: bool | None, leave: Callable[[Point], bool]) -> WorkloadFit | None:
    """The group's fit made again without the real-input points `leave` picks (synthetic-input
    points, which measure the GPU alone, always stay); no leave-one-out."""
    kept = [p for p in group if p.input == SYNTHETIC_INPUT or not leave(p)]
    return fit_workload(name, kept, disk_classes, dataset_gib, disk_mbps, False, smooth)


def _reads_once(point: Point) -> bool:
    """Whether the point's job reads each sample once, as the point says (the loaders of points add
    what its workload declares: `sizer.facts`); unknown: it reads its data every pass, as training does."""
    return bool(point.reads_once)


def fit_workload(name: str, group: list[Point], disk_classes: dict[str, DiskClass], dataset_gib: float | None,
                 disk_mbps: dict[str, float], do_loo: bool, smooth: bool | None) -> WorkloadFit | None:
    """One group's fit (see `fit_points`); None when none of its points is usable."""
    measured = measure_group(name, group, disk_classes, disk_mbps)
    if measured is None:
        return None
    if not measured.real:
        return assemble(measured, _ceiling_only(measured), dataset_gib)
    fit = assemble(measured, _fit_terms(measured, do_loo, smooth), dataset_gib)
    _note_ceiling_at_best(fit, measured)
    return fit


def _note_ceiling_at_best(fit: WorkloadFit, measured: GroupMeasurements) -> None:
    """A note where a fitted ceiling rests on the best measured shape: the fitted plateau would lie below it."""
    best = max(measured.real, key=lambda p: p.throughput)
    ceiling = fit.params["gpu_ceiling"]
    if ceiling.source != "measured" and abs(ceiling.value - best.throughput) <= 1e-6 * best.throughput:
        level = f"{best.throughput:,.0f}" if best.throughput >= 100 else f"{best.throughput:.3g}"
        fit.notes.append(f"ceiling held at the best measured shape, {level} {fit.unit} at "
                         f"{best.shape_label()} (median of its passes): a fitted plateau never lies below a measurement")


def _ceiling_only(measured: GroupMeasurements) -> FittedTerms:
    """Only GPU-ceiling points: nothing is known of the CPU or disk side."""
    g = measured.gpu_ceiling or 0.0
    measured.notes.append("only synthetic-input points: the CPU and disk terms are not measured")
    return FittedTerms({"G": g, "c": g, "s": 0.0, "k": 0.0, "b": 0.0, "F": measured.footprint_gib or 0.0,
                        "D": measured.dataset_gib or 0.0, "p": 0.0})


@dataclass
class _Candidate:
    """A fit in the problem's units (rates divided by the median rate), with its leave-one-out
    predictions where they were made."""

    values: dict[str, float]
    free: set[str]
    problem: FitProblem
    loo_preds: list[float] | None = None
    kind: str = "min"

    def take_smooth(self, problem: FitProblem, values: dict[str, float]) -> None:
        self.values, self.problem, self.kind = values, problem, "softmin"
        self.free = self.free | {"p"}


def _fit_terms(measured: GroupMeasurements, do_loo: bool, smooth: bool | None) -> FittedTerms:
    """Fit the free parameters of a group with real-input points, choosing between `min` and a
    smooth minimum (see `fit_points`)."""
    v, m, bw = measured.shapes()
    reads_nothing = _reads_nothing(measured.real)
    free, pre_notes = _free_params(measured, v, m, bw, reads_nothing)
    values0 = _initial_values(measured, v, m, bw, free, reads_nothing)
    # Fit in units of the median rate: the problem (and so its solution) does not depend on the unit,
    # and doubling every measurement exactly doubles the fitted rates.
    y = measured.throughputs()
    scale = float(np.median(y))
    fit = _Candidate(*fit_identifiable(v, m, bw, y / scale, _rescale(values0, 1.0 / scale), free,
                                       measured.notes, pre_notes, ceiling_floor=True))
    if do_loo and len(y) >= _MIN_LOO_POINTS:
        _choose_by_held_out(fit, smooth, measured.notes)
    elif smooth:
        _force_smooth(fit)
    result, _ = fit.problem.solve([fit.values]) if fit.problem.specs else (None, 0.0)
    values = fit.problem.values(result.x) if result is not None else fit.values
    loo_preds = None if fit.loo_preds is None else [x * scale for x in fit.loo_preds]
    return FittedTerms(_rescale(values, scale), fit.free, fit.problem, result, scale, loo_preds, fit.kind)


def _reads_nothing(real: list[Point]) -> bool:
    """Every point measured its reads, and none read anything from the disk (a corpus loaded onto the
    device before the window): the disk does not bound this job, whatever its class."""
    reads = [p.read_mb_per_sample for p in real if p.read_mb_per_sample is not None]
    return len(reads) == len(real) and max(reads) <= 0.0


def _free_params(measured: GroupMeasurements, v: np.ndarray, m: np.ndarray, bw: np.ndarray,
                 reads_nothing: bool) -> tuple[set[str], dict[str, str]]:
    """The keys to fit, and why some are fixed before any fit. The GPU ceiling is measured where
    synthetic-input points exist (input already on the device), fitted otherwise."""
    throttled = np.isfinite(bw)
    free = {"c", "s", "k"} | (set() if measured.gpu_ceiling else {"G"})
    if not measured.bytes_per_sample and not reads_nothing and throttled.any():
        free.add("b")
    levels = len(set(v.tolist()))
    pre_notes: dict[str, str] = {}
    if reads_nothing:
        pre_notes["b"] = "no measured point read from the disk: the disk does not bound it"
    if levels < 3:
        free.discard("k")
        pre_notes["k"] = f"measured at {levels} vCPU level(s): contention (kappa) not identifiable, set to 0"
    if levels < 2:
        free.discard("s")
        pre_notes["s"] = f"measured at {levels} vCPU level(s): serial fraction (sigma) not identifiable, set to 0"
    ram_levels = len(set(m[throttled].tolist())) if throttled.any() else 0
    if measured.dataset_gib is None and ram_levels >= 2 and "b" in free:
        free.add("D")
    if measured.footprint_gib is None and measured.dataset_gib is not None and ram_levels >= 2 and throttled.any():
        free.add("F")
    return free, pre_notes


def _initial_values(measured: GroupMeasurements, v: np.ndarray, m: np.ndarray, bw: np.ndarray, free: set[str],
                    reads_nothing: bool) -> dict[str, float]:
    """Where the fit starts: measured values where there are some, simple estimates otherwise."""
    y = measured.throughputs()
    lowest = v == v.min()
    per_vcpu = float(np.median(y[lowest] / v[lowest]))
    footprint = measured.footprint_gib if measured.footprint_gib is not None else 0.0
    dataset = measured.dataset_gib or (float(m.max()) * 1.5 if "D" in free else 0.0)
    # Measurements outrank the model: the ceiling is never below the best measured shape.
    return {
        "G": max(measured.gpu_ceiling, float(y.max())) if measured.gpu_ceiling else float(y.max()) * 1.02,
        "c": max(per_vcpu, 1e-9),
        "s": 0.02 if "s" in free else 0.0,
        "k": 0.0005 if "k" in free else 0.0,
        "b": max(_initial_bytes_per_sample(measured, m, bw, y, reads_nothing), 0.0),
        "F": footprint,
        "D": dataset,
        "p": 0.0,
    }


def _initial_bytes_per_sample(measured: GroupMeasurements, m: np.ndarray, bw: np.ndarray, y: np.ndarray,
                              reads_nothing: bool) -> float:
    """Measured bytes per sample, else the most the throttled disks could have fed at the measured rates."""
    throttled = np.isfinite(bw)
    if measured.bytes_per_sample:
        return measured.bytes_per_sample
    if reads_nothing or not throttled.any():
        return 0.0
    footprint = measured.footprint_gib if measured.footprint_gib is not None else 0.0
    dataset = measured.dataset_gib
    miss = np.ones_like(m) if not dataset else np.clip(1 - (m - footprint) / dataset, 0.05, 1)
    return float(np.min(bw[throttled] / (y[throttled] * miss[throttled])))


def _rescale(values: dict[str, float], factor: float) -> dict[str, float]:
    """Rates (G, c) times `factor`; bytes per sample divided by it (X_io = B / (b * miss))."""
    return dict(values, G=values["G"] * factor, c=values["c"] * factor, b=values["b"] / factor)


def _choose_by_held_out(fit: _Candidate, smooth: bool | None, notes: list[str]) -> None:
    """Leave-one-out predictions of the `min` fit; a smooth minimum replaces it where `smooth` forces
    it or where it predicts held-out points clearly better without moving the physics."""
    problem = fit.problem
    fit.loo_preds = leave_one_out(problem, fit.values)
    want_smooth = smooth if smooth is not None else len(problem.y) >= len(problem.specs) + 5
    if not want_smooth:
        return
    smooth_problem = with_sharpness(problem)
    res, smooth_cost = smooth_problem.solve([dict(fit.values, p=8.0), dict(fit.values, p=3.0)])
    # Only a clearly better in-sample fit is worth the leave-one-out comparison.
    if res is None or smooth_cost >= 0.7 * problem.cost(fit.values):
        return
    smooth_values = smooth_problem.values(res.x)
    smooth_loo = leave_one_out(smooth_problem, smooth_values)
    err_min = ape_stats(fit.loo_preds, problem.y)[0]
    err_smooth = ape_stats(smooth_loo, problem.y)[0]
    if smooth or (err_smooth < 0.75 * err_min and err_min - err_smooth > 0.005
                  and _physical(smooth_values, fit.values)):
        fit.take_smooth(smooth_problem, smooth_values)
        fit.loo_preds = smooth_loo
        notes.append("a smooth minimum near the knee predicted held-out shapes better than min()")


def _force_smooth(fit: _Candidate) -> None:
    """The smooth minimum without a leave-one-out comparison (too few points, or none asked for)."""
    smooth_problem = with_sharpness(fit.problem)
    res, _ = smooth_problem.solve(starts(dict(fit.values, p=8.0), smooth_problem))
    if res is not None:
        fit.take_smooth(smooth_problem, smooth_problem.values(res.x))


def _physical(smooth_values: dict[str, float], min_values: dict[str, float]) -> bool:
    """A smooth minimum may move the knee, not the physics: every parameter stays near its min() fit."""
    for key in ("G", "c", "b"):
        a, b = smooth_values.get(key, 0.0), min_values.get(key, 0.0)
        if b > 0 and not 0.8 <= a / b <= 1.25:
            return False
    return True
