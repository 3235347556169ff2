"""The model's values: a parameter with its origin, a prediction, and one workload's fit."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sizer.model.equations import binding_term, cache_ram, ram_to_lift_io, throughput_terms
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT

# Where a parameter's value comes from (`Param.source`).
SOURCES = ("fit", "measured", "disk-class", "fio", "fixed")


@dataclass
class Param:
    name: str
    value: float
    low: float | None
    high: float | None
    unit: str
    source: str  # one of SOURCES
    identifiable: bool = True
    note: str = ""
    bound: str = ""  # "lower" or "upper" where a fixed value is only a bound on the real one


@dataclass
class Prediction:
    throughput: float
    bottleneck: str  # gpu / cpu / disk / memory
    terms: dict[str, float]  # "gpu" and "cpu" always; "io" only where a disk bound applies
    ram_needed_gib: float | None = None  # when io binds: RAM that would cache enough to lift it


@dataclass
class WorkloadFit:
    workload: str
    unit: str
    params: dict[str, Param]
    n_points: int
    loo_median_ape: float | None
    loo_max_ape: float | None
    residuals: list[tuple[Point, float]]
    calibration_ips: float | None
    model: str = "min"  # "min" or "softmin"
    loo: list[tuple[Point, float]] = field(default_factory=list)  # (held-out point, its LOO prediction)
    gpu_model: str = ""
    gpu_memory_gib: float | None = None
    notes: list[str] = field(default_factory=list)
    reads_once: bool = False  # each sample read once: the page cache never serves a later pass
    uses_gpu: bool = True  # its points saw a GPU at work; a job without one has no GPU ceiling
    # Per-GPU rate against GPU count (sizer.model.scaling.GpuScaling), from the multi-GPU points of
    # the same workload variant; None: none measured (the one-GPU fit's points are one-GPU points).
    scaling: Any = None
    # The same fit made again without the real-input points a predicate picks (held-out errors,
    # `sizer.model.level_error`); None for a fit built by hand.
    refit_without: Callable[[Callable[[Point], bool]], WorkloadFit | None] | None = field(
        default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ parameters
    def value(self, name: str, default: float | None = None) -> float | None:
        p = self.params.get(name)
        return default if p is None else p.value

    @property
    def ceiling(self) -> float:
        return float(self.params["gpu_ceiling"].value)

    @property
    def measured_vcpus_max(self) -> int | None:
        """The most vCPUs of a fitted point that read real input: beyond it the CPU term is extrapolated."""
        counts = [p.vcpus for p, _ in self.residuals if p.input != SYNTHETIC_INPUT]
        return max(counts) if counts else None

    @property
    def ceiling_name(self) -> str:
        """What the ceiling is called in words: the GPU's own speed where a point with input already
        on the device measured it; otherwise (a job that runs no GPU, or one swept without that
        point) just the level its points reach. A GPU job's fitted level is not the GPU's: an
        inference sweep without the point can fit 2,644 images/s, the level its CPU-bound points
        reach, where the GPU infers 12,800 a second."""
        measured = self.params.get("gpu_ceiling")
        return "GPU ceiling" if self.uses_gpu and measured is not None and measured.source == "measured" else "ceiling"

    def holds_dataset(self, cache_ram_gib: float) -> bool:
        """Whether a page cache of `cache_ram_gib` (RAM as one GPU alone) holds the whole measured
        dataset beside the workload's footprint (at the high end of its interval), for a job that
        reads its samples again: past the first pass it reads nothing from its disk."""
        dataset = self.value("measured_dataset_gib") or self.value("dataset_gib") or 0.0
        footprint = self.params.get("footprint_gib")
        if self.reads_once or dataset <= 0 or footprint is None:
            return False
        needed = (footprint.high if footprint.high is not None else footprint.value) + dataset
        return cache_ram_gib >= needed

    def disk_mbps(self, disk_class: str) -> float | None:
        """Read bandwidth the model uses for a disk class; None = unthrottled (never binding)."""
        p = self.params.get(f"disk_{disk_class}_mbps")
        return None if p is None else p.value

    def _values(self, cpu_scale: float = 1.0) -> dict[str, float]:
        return {
            "G": self.ceiling,
            "c": float(self.params["per_vcpu"].value) * cpu_scale,
            "s": float(self.params["usl_sigma"].value),
            "k": float(self.params["usl_kappa"].value),
            "b": float(self.params["bytes_per_sample"].value),
            "F": float(self.params["footprint_gib"].value),
            "D": float(self.value("dataset_gib", 0.0) or 0.0),
            "p": float(self.value("knee_sharpness", 0.0) or 0.0),
        }

    # ------------------------------------------------------------------ prediction
    def usl_peak_vcpus(self) -> float | None:
        """vCPUs at which the fitted CPU term peaks (sqrt((1 - sigma) / kappa)); None when it never does."""
        s, k = float(self.params["usl_sigma"].value), float(self.params["usl_kappa"].value)
        if k <= 0 or s >= 1:
            return None
        return math.sqrt((1.0 - s) / k)

    def predict(self, vcpus: float, ram_gib: float, disk_mbps: float | None, cpu_scale: float = 1.0,
                monotone: bool = False) -> Prediction:
        """Throughput of one shape: `disk_mbps` None means an unthrottled disk (no I/O bound).

        `monotone`: an instance with more vCPUs than the USL peak can still run the peak's number of
        input workers, so the CPU term stays at its peak instead of falling (for sizing; the fitted
        curve through measured points uses the plain USL).

        A job that reads each sample once (`reads_once`) gets nothing from RAM beyond its own
        footprint: every sample comes from the disk, as in the first pass of any job.
        """
        cache_gib = min(ram_gib, self.value("footprint_gib") or 0.0) if self.reads_once else ram_gib
        return self._predict(vcpus, ram_gib, cache_gib, disk_mbps, cpu_scale, monotone)

    def predict_measured(self, point: Point) -> Prediction:
        """What a point of this shape measures, as the sweep measures it: a window inside the first
        pass over the data read everything from the disk, whatever the RAM (see `cache_ram`)."""
        footprint = self.value("footprint_gib")
        dataset = self.value("measured_dataset_gib") or self.value("dataset_gib")
        ram = cache_ram(point, footprint, dataset)
        disk = self.disk_mbps(point.disk_class)
        return self._predict(point.vcpus, point.ram_gib, ram, disk, cpu_scale=1.0)

    def predict_share(self, point: Point, vcpus: float, ram_gib: float, disk_mbps: float | None,
                      cpu_scale: float = 1.0) -> Prediction:
        """`predict_measured` at another shape: `vcpus`, `ram_gib` and `disk_mbps` (None: not
        capped) in place of the point's, measured as the point was (its window inside or past its
        first pass). One GPU's share of a multi-GPU point (sizer.model.scaling). `cpu_scale`: the
        CPU term carried to another host's CPU (`sizer.fingerprint`)."""
        footprint = self.value("footprint_gib")
        dataset = self.value("measured_dataset_gib") or self.value("dataset_gib")
        cache = min(ram_gib, cache_ram(point, footprint, dataset))
        if self.reads_once:
            cache = min(cache, footprint or 0.0)
        return self._predict(vcpus, ram_gib, cache, disk_mbps, cpu_scale=cpu_scale)

    def _predict(self, vcpus: float, ram_gib: float, cache_gib: float, disk_mbps: float | None,
                 cpu_scale: float = 1.0, monotone: bool = False) -> Prediction:
        """`ram_gib` decides whether the shape runs at all; `cache_gib` is the RAM its page cache
        effectively had for the data (see `predict` and `predict_measured`)."""
        if vcpus < 1:
            raise ValueError("vcpus must be >= 1")
        values = self._values(cpu_scale)
        peak = self.usl_peak_vcpus() if monotone else None
        if peak is not None and vcpus > peak:
            vcpus = max(peak, 1.0)
        x, terms = throughput_terms(values, np.array([float(vcpus)]), np.array([float(cache_gib)]),
                                    np.array([np.nan if disk_mbps is None else float(disk_mbps)]))
        term_values = {"gpu": float(terms["gpu"][0]), "cpu": float(terms["cpu"][0])}
        io = float(terms["io"][0])
        if math.isfinite(io):
            term_values["io"] = io
        if values["F"] > 0 and ram_gib < values["F"]:
            # Less RAM than the workload's own footprint: the shape is killed by the memory limit.
            return Prediction(0.0, "memory", term_values, ram_needed_gib=values["F"])
        bound = binding_term(term_values)
        ram_needed = None
        label = {"gpu": "gpu", "cpu": "cpu"}.get(bound, "disk")
        if bound == "io" and not self.reads_once:
            others = min(term_values["gpu"], term_values["cpu"])
            ram_needed = ram_to_lift_io(values, disk_mbps, others)
            if ram_needed is not None and ram_needed <= 2 * ram_gib:
                label = "memory"
        return Prediction(float(x[0]), label, term_values, ram_needed_gib=ram_needed)

    def summary(self) -> dict[str, Any]:
        """A plain dict for JSON output (residuals as shape, measured, predicted)."""
        return {
            "workload": self.workload,
            "unit": self.unit,
            "model": self.model,
            "n_points": self.n_points,
            "loo_median_ape": self.loo_median_ape,
            "loo_max_ape": self.loo_max_ape,
            "calibration_ips": self.calibration_ips,
            "gpu_model": self.gpu_model,
            "gpu_memory_gib": self.gpu_memory_gib,
            "params": {name: vars(p) for name, p in self.params.items()},
            "residuals": [
                {"vcpus": p.vcpus, "ram_gib": p.ram_gib, "disk_class": p.disk_class,
                 "measured": p.throughput, "predicted": pred}
                for p, pred in self.residuals
            ],
            "notes": list(self.notes),
            "reads_once": self.reads_once,
        }
