"""Scaling with the GPU count: an instance's per-GPU rate at N GPUs against one GPU's.

A point of N GPUs measures the whole instance: N processes in one cpuset of V vCPUs, under one
memory limit with one page cache, reading one disk. Its per-GPU rate is X / N, and its efficiency
compares it with one GPU at the same vCPUs per GPU, v = V / N, with the same RAM and disk class:

    efficiency(N, v) = X(N GPUs, N*v vCPUs) / (N * X(1 GPU, v vCPUs))

the one-GPU rate measured at that shape where it was (the median of its passes), else the one-GPU
fit's prediction for it. The assumption the recommender made of every multi-GPU row before it had
measurements is the per-GPU share: N times the one-GPU model at V / N vCPUs, RAM / N and 1 / N of
the disk's bandwidth; the gap between that and the measured rate is what the assumption missed.

For a catalog row of G GPUs (`GpuScaling.efficiency_at`): the efficiency measured at G, between two
measured counts the straight line between them (one GPU: 1), beyond the largest measured count N
that count's ("assumed linear beyond N measured GPUs": the per-GPU rate stays). At a count measured
at several vCPU-per-GPU levels, the level nearest the row's share.

An instance of N GPUs is judged by its loaded per-GPU figure (`GpuScaling.loaded_at`): where a
point of several GPUs was measured, one GPU's figure times that count's efficiency (measured with
the whole node busy); else, where the fit's points were measured with every slot of a parallel sweep
busy, its own figure; else one GPU alone times the load factor the interference check measured
(`sizer.model.load`); else one GPU alone, said as an idle host's figure.

Page cache and disk of a multi-GPU instance (`shared_cache_ram_gib`): a dataset cached once serves
every GPU, so the RAM for caching is the instance's, not a GPU's; each GPU reads 1 / N of the disk.
Pure: points and fits in, figures out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from sizer.model.load import LoadFactor
from sizer.model.types import WorkloadFit
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT


def shared_cache_ram_gib(instance_ram_gib: float, gpus: int, footprint_gib: float) -> float:
    """The RAM one GPU of an instance of `gpus` behaves as if it had alone: the instance's page cache
    (its RAM less every GPU process's footprint) holds one copy of the data for all of them, so one
    GPU sees what a one-GPU shape of this much RAM would (its own footprint, that cache)."""
    return max(0.0, instance_ram_gib - (max(gpus, 1) - 1) * max(footprint_gib, 0.0))


@dataclass(frozen=True)
class ScalingPoint:
    """One measured multi-GPU shape: its rate, the one-GPU reference at its vCPUs per GPU and where
    that came from, and the per-GPU-share prediction (the old assumption)."""

    gpus: int
    vcpus: int
    ram_gib: float
    disk_class: str
    rate: float  # the whole instance's
    reference: float | None  # one GPU at vcpus / gpus, same RAM and disk
    reference_basis: str  # "measured" or "model" ("" without a reference)
    share_prediction: float | None  # gpus x the one-GPU model at the per-GPU share

    @property
    def vcpus_per_gpu(self) -> float:
        return self.vcpus / self.gpus

    @property
    def per_gpu_rate(self) -> float:
        return self.rate / self.gpus

    @property
    def efficiency(self) -> float | None:
        return None if not self.reference else self.rate / (self.gpus * self.reference)

    @property
    def gap(self) -> float | None:
        """The measured rate against the per-GPU-share prediction (-0.1: 10% below it)."""
        return None if not self.share_prediction else (self.rate - self.share_prediction) / self.share_prediction

    def row(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "vcpus": self.vcpus, "vcpus_per_gpu": self.vcpus_per_gpu, "ram_gib": self.ram_gib,
                "disk_class": self.disk_class, "rate": self.rate, "per_gpu_rate": self.per_gpu_rate,
                "one_gpu_rate": self.reference, "one_gpu_basis": self.reference_basis,
                "efficiency": self.efficiency, "share_prediction": self.share_prediction, "gap": self.gap}


@dataclass(frozen=True)
class LoadedFigure:
    """The factor on one GPU's figure that gives an N-GPU instance's loaded per-GPU figure, what it
    rests on (`basis`: "one GPU", "measured with N GPUs", "measured with every slot busy",
    "load factor", "idle host"), and the words its reason says."""

    factor: float
    basis: str
    words: str = ""

    @property
    def reason(self) -> str:
        """The basis as the chosen row's reason says it."""
        return {"measured with every slot busy": "measured with every slot of a parallel sweep busy",
                "load factor": "one GPU alone x the load factor of the interference check",
                "idle host": "none measured, so an idle host's figure (each GPU may get less)"}.get(self.basis, self.basis)


@dataclass(frozen=True)
class GpuScaling:
    """A workload variant's multi-GPU points against its one-GPU fit (empty: none measured), and the
    load its one-GPU points saw (`sizer.model.load`)."""

    points: tuple[ScalingPoint, ...] = ()
    load: LoadFactor = LoadFactor()

    def loaded_at(self, gpus: int, vcpus_per_gpu: float | None = None) -> LoadedFigure:
        """How an instance of `gpus` GPUs gets its loaded per-GPU figure from one GPU's (see the module)."""
        if gpus <= 1:
            return LoadedFigure(1.0, "one GPU")
        measured = self.measured_gpus
        if measured > 1:
            factor = self.efficiency_at(gpus, vcpus_per_gpu)
            beyond = self.note_for(gpus)
            return LoadedFigure(factor, f"measured with {measured} GPUs",
                                f"loaded per-GPU figure: one GPU's x {factor:.3g}, the efficiency measured with "
                                f"{measured} GPUs at once" + (f" ({beyond})" if beyond else ""))
        load = self.load
        if load.fit_loaded:
            return LoadedFigure(1.0, "measured with every slot busy",
                                f"loaded per-GPU figure: measured with the other {load.slots - 1} slot(s) of a "
                                "parallel sweep busy")
        if load.factor is not None:
            return LoadedFigure(load.factor, "load factor",
                                f"loaded per-GPU figure: one GPU alone x {load.factor:.3g}, the load factor "
                                f"measured with {load.slots} slots busy (the interference check)")
        return LoadedFigure(1.0, "idle host",
                            "an idle host's figure: no loaded measurement (a point of several GPUs, `--gpus`, or "
                            "a parallel sweep's interference check, `--parallel`), so each GPU may get less")

    @property
    def measured_gpus(self) -> int:
        """The most GPUs a point with an efficiency was measured at (1 without one)."""
        return max((p.gpus for p in self.points if p.efficiency is not None), default=1)

    def efficiency_at(self, gpus: int, vcpus_per_gpu: float | None = None) -> float:
        """The per-GPU efficiency of an instance of `gpus` GPUs (see the module): 1 at one GPU or
        without measurements, interpolated between measured counts, the largest count's beyond it."""
        table = {1: 1.0, **self._by_count(vcpus_per_gpu)}
        if gpus <= 1:
            return 1.0
        counts = sorted(table)
        if gpus >= counts[-1]:
            return table[counts[-1]]
        upper = next(n for n in counts if n >= gpus)
        lower = max(n for n in counts if n <= gpus)
        if upper == lower:
            return table[lower]
        return table[lower] + (table[upper] - table[lower]) * (gpus - lower) / (upper - lower)

    def _by_count(self, vcpus_per_gpu: float | None) -> dict[int, float]:
        """GPU count -> its efficiency at the measured vCPU-per-GPU level nearest `vcpus_per_gpu`
        (None: the largest), the median over that level's shapes."""
        measured = [(p, p.efficiency) for p in self.points if p.efficiency is not None]
        out: dict[int, float] = {}
        for n in sorted({p.gpus for p, _ in measured}):
            at_n = [(p, e) for p, e in measured if p.gpus == n]
            levels = sorted({p.vcpus_per_gpu for p, _ in at_n})
            level = levels[-1] if vcpus_per_gpu is None else min(levels, key=lambda v: (abs(v - vcpus_per_gpu), v))
            out[n] = statistics.median(e for p, e in at_n if p.vcpus_per_gpu == level)
        return out

    def note_for(self, gpus: int) -> str:
        """What sizing a row of `gpus` GPUs assumes beyond the measurements ('' where nothing)."""
        measured = self.measured_gpus
        if gpus <= measured:
            return ""
        return f"assumed linear beyond {measured} measured GPU{'s' if measured > 1 else ''}"

    def summary(self) -> dict[str, Any] | None:
        """The report's scaling table (results.json `scaling`); None without multi-GPU points."""
        if not self.points:
            return None
        return {"measured_gpus": self.measured_gpus,
                "rows": [p.row() for p in sorted(self.points, key=lambda p: (p.disk_class, p.ram_gib, p.vcpus_per_gpu,
                                                                              p.gpus))]}


def measure_scaling(fit: WorkloadFit, one_gpu: list[Point], multi_gpu: list[Point],
                    load: LoadFactor | None = None) -> GpuScaling:
    """The scaling of a fitted variant from its multi-GPU points (each shape once: passes combined),
    against its one-GPU points (`one_gpu`, passes combined) and its fit; `load`: the load its one-GPU
    measurements saw (`sizer.model.load.measure_load`)."""
    singles = [p for p in one_gpu if p.usable and p.input != SYNTHETIC_INPUT and p.gpus == 1]
    rows = []
    for p in multi_gpu:
        if not p.usable or p.input == SYNTHETIC_INPUT or p.gpus < 2:
            continue
        reference, basis = _one_gpu_reference(fit, singles, p)
        rows.append(ScalingPoint(p.gpus, p.vcpus, p.ram_gib, p.disk_class, p.throughput, reference, basis,
                                 share_prediction(fit, p)))
    return GpuScaling(tuple(rows), load or LoadFactor())


def _one_gpu_reference(fit: WorkloadFit, singles: list[Point], point: Point) -> tuple[float | None, str]:
    """One GPU at the point's vCPUs per GPU, RAM and disk class: measured where a one-GPU point has
    that shape, else the fit's prediction for it as the point was measured."""
    per_gpu = point.vcpus / point.gpus
    same = [s.throughput for s in singles
            if s.vcpus == per_gpu and s.disk_class == point.disk_class and round(s.ram_gib, 4) == round(point.ram_gib, 4)]
    if same:
        return statistics.median(same), "measured"
    if per_gpu < 1:
        return None, ""
    predicted = fit.predict_share(point, per_gpu, point.ram_gib, fit.disk_mbps(point.disk_class)).throughput
    return (predicted, "model") if predicted > 0 else (None, "")


def share_prediction(fit: WorkloadFit, point: Point) -> float | None:
    """The old per-GPU-share prediction of a multi-GPU point: its GPU count times the one-GPU model
    at V / N vCPUs, RAM / N and 1 / N of the disk's bandwidth."""
    n = point.gpus
    if point.vcpus / n < 1:
        return None
    mbps = fit.disk_mbps(point.disk_class)
    predicted = fit.predict_share(point, point.vcpus / n, point.ram_gib / n, None if mbps is None else mbps / n)
    return n * predicted.throughput
