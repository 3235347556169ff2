"""The bottleneck performance model: fit measured points, predict any instance shape.

Per workload (DESIGN.md, "The performance model"):

    X(v, m, d) = min( X_gpu,
                      X_cpu(v)   = c * v / (1 + s*(v-1) + k*v*(v-1)),      Universal Scalability Law
                      X_io(d, m) = B_d / (bytes_per_sample * miss(m)) )
    miss(m)    = clamp(1 - (m - footprint) / dataset, 0, 1)                 page-cache miss fraction

Every parameter keeps its physical meaning and says where it came from (`Param.source`): measured
directly (a synthetic-input point gives the GPU ceiling; read bytes, peak RSS and the dataset size
come with the points), taken from the disk-class caps or fio, fitted (scipy least squares on
relative error, with a 95% interval from the Jacobian), or fixed because the points cannot identify
it (said in `Param.note`). Leave-one-out error tells how well the model predicts a shape it did not
see. A smooth minimum (a p-norm) replaces `min` only when it predicts held-out points better.

This module is pure: points in, fits out; nothing is read or written.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
from scipy.optimize import least_squares

from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.points import Point, combine_passes

SOURCES = ("fit", "measured", "disk-class", "fio", "fixed")
SYNTHETIC_INPUT = "synthetic"
# Keys a sweep may leave in Point.extra for the unthrottled device's own read bandwidth (MB/s).
DEVICE_MBPS_KEYS = ("device_read_mbps", "disk_read_mbps", "fio_read_mbps")
Z95 = 1.959964
_MIN_LOO_POINTS = 3


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
        point) just the level its points reach. A GPU job's fitted level is not the GPU's: an H100's
        inference sweep without the point fitted 2,644 images/s, the level its CPU-bound points
        reached, where the GPU infers 12,800 a second."""
        measured = self.params.get("gpu_ceiling")
        return "GPU ceiling" if self.uses_gpu and measured is not None and measured.source == "measured" else "ceiling"

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

    def predict(self, vcpus: int, ram_gib: float, disk_mbps: float | None, cpu_scale: float = 1.0,
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

    def _predict(self, vcpus: int, ram_gib: float, cache_gib: float, disk_mbps: float | None,
                 cpu_scale: float = 1.0, monotone: bool = False) -> Prediction:
        """`ram_gib` decides whether the shape runs at all; `cache_gib` is the RAM its page cache
        effectively had for the data (see `predict` and `predict_measured`)."""
        if vcpus < 1:
            raise ValueError("vcpus must be >= 1")
        values = self._values(cpu_scale)
        peak = self.usl_peak_vcpus() if monotone else None
        if peak is not None and vcpus > peak:
            vcpus = max(peak, 1.0)
        x, terms = _evaluate(values, np.array([float(vcpus)]), np.array([float(cache_gib)]),
                             np.array([np.nan if disk_mbps is None else float(disk_mbps)]))
        term_values = {"gpu": float(terms["gpu"][0]), "cpu": float(terms["cpu"][0])}
        io = float(terms["io"][0])
        if math.isfinite(io):
            term_values["io"] = io
        if values["F"] > 0 and ram_gib < values["F"]:
            # Less RAM than the workload's own footprint: the shape is killed by the memory limit.
            return Prediction(0.0, "memory", term_values, ram_needed_gib=values["F"])
        bound = min((k for k in _TIE_ORDER if k in term_values),
                    key=lambda k: term_values[k] * (1.0 + _TIE_TOLERANCE * _TIE_ORDER.index(k)))
        ram_needed = None
        label = {"gpu": "gpu", "cpu": "cpu"}.get(bound, "disk")
        if bound == "io" and not self.reads_once:
            others = min(term_values["gpu"], term_values["cpu"])
            ram_needed = _ram_to_lift_io(values, disk_mbps, others)
            if ram_needed is not None and ram_needed <= 2 * ram_gib:
                label = "memory"
        return Prediction(float(x[0]), label, term_values, ram_needed_gib=ram_needed)

    def predict_measured(self, point: Point) -> Prediction:
        """What a point of this shape measures, as the sweep measures it: a window inside the first
        pass over the data read everything from the disk, whatever the RAM (see `_cache_ram`)."""
        footprint = self.value("footprint_gib")
        dataset = self.value("measured_dataset_gib") or self.value("dataset_gib")
        ram = _cache_ram(point, None, footprint, dataset)
        disk = self.disk_mbps(point.disk_class)
        return self._predict(point.vcpus, point.ram_gib, ram, disk, cpu_scale=1.0)

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


def cpu_scale(measured_calibration: float | None, target_calibration: float | None) -> float:
    """Factor for the CPU term on a host whose per-vCPU calibration differs from the measuring host."""
    if not measured_calibration or not target_calibration:
        return 1.0
    if measured_calibration <= 0 or target_calibration <= 0:
        return 1.0
    return float(target_calibration) / float(measured_calibration)


# ====================================================================== model evaluation
def _evaluate(values: dict[str, float], v: np.ndarray, m: np.ndarray, bw: np.ndarray) -> tuple[np.ndarray, dict]:
    """Vectorised model: returns throughput and its gpu/cpu/io terms (io = inf where not binding)."""
    G, c, s, k, b, F, D, p = (values[key] for key in ("G", "c", "s", "k", "b", "F", "D", "p"))
    gpu = np.full(v.shape, G, dtype=float)
    cpu = c * v / (1.0 + s * (v - 1.0) + k * v * (v - 1.0))
    if D > 0:
        miss = np.clip(1.0 - (m - F) / D, 0.0, 1.0)
    else:
        miss = np.ones_like(m)
    with np.errstate(divide="ignore", invalid="ignore"):
        io = np.where(np.isfinite(bw) & (b > 0) & (miss > 0), bw / (b * miss), np.inf)
    if p > 0:
        # A term near zero overflows its power: the sum is then infinite and the rate 0, as it should be.
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            x = (gpu ** -p + cpu ** -p + io ** -p) ** (-1.0 / p)
        x = np.nan_to_num(x, nan=0.0, posinf=0.0)
    else:
        x = np.minimum(np.minimum(gpu, cpu), io)
    return x, {"gpu": gpu, "cpu": cpu, "io": io}


# Where terms tie, the binding one is the first in this order: a GPU ceiling that was not reached is
# set at the level the other terms reach, and a tie with it means the other term binds.
_TIE_ORDER = ("cpu", "io", "gpu")
_TIE_TOLERANCE = 1e-9


def _binding(values: dict[str, float], v: np.ndarray, m: np.ndarray, bw: np.ndarray) -> np.ndarray:
    _, terms = _evaluate(values, v, m, bw)
    stacked = np.vstack([terms[k] * (1.0 + _TIE_TOLERANCE * i) for i, k in enumerate(_TIE_ORDER)])
    return np.array(_TIE_ORDER)[np.argmin(stacked, axis=0)]


def _ram_to_lift_io(values: dict[str, float], bw: float | None, target: float) -> float | None:
    """RAM at which the page cache cuts disk reads enough for X_io to reach `target`."""
    b, F, D = values["b"], values["F"], values["D"]
    if bw is None or b <= 0 or D <= 0 or target <= 0:
        return None
    miss_needed = bw / (b * target)
    if miss_needed >= 1:
        return F
    return F + D * (1.0 - max(miss_needed, 0.0))


# ====================================================================== fitting
@dataclass
class _Spec:
    """One free parameter: model key, bounds, log-transformed or not."""

    key: str
    low: float
    high: float
    log: bool


_PARAM_INFO = {
    # key: (public name, unit)
    "G": ("gpu_ceiling", None),
    "c": ("per_vcpu", None),
    "s": ("usl_sigma", ""),
    "k": ("usl_kappa", ""),
    "b": ("bytes_per_sample", "MB"),
    "F": ("footprint_gib", "GiB"),
    "D": ("dataset_gib", "GiB"),
    "p": ("knee_sharpness", ""),
}


class _Problem:
    """Least squares on relative error over the real-input points; `specs` are the free parameters."""

    def __init__(self, v, m, bw, y, fixed: dict[str, float], specs: list[_Spec]):
        self.v, self.m, self.bw, self.y = v, m, bw, y
        self.fixed = dict(fixed)
        self.specs = specs

    def to_theta(self, values: dict[str, float]) -> np.ndarray:
        out = []
        for sp in self.specs:
            x = min(max(values[sp.key], sp.low), sp.high)
            out.append(math.log(x) if sp.log else x)
        return np.array(out, dtype=float)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = [math.log(sp.low) if sp.log else sp.low for sp in self.specs]
        hi = [math.log(sp.high) if sp.log else sp.high for sp in self.specs]
        return np.array(lo), np.array(hi)

    def values(self, theta: np.ndarray) -> dict[str, float]:
        out = dict(self.fixed)
        for sp, x in zip(self.specs, theta):
            out[sp.key] = math.exp(x) if sp.log else float(x)
        return out

    def residuals(self, theta: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        vals = self.values(theta)
        sel = slice(None) if idx is None else idx
        x, _ = _evaluate(vals, self.v[sel], self.m[sel], self.bw[sel])
        return (x - self.y[sel]) / self.y[sel]

    def solve(self, starts: list[dict[str, float]], idx: np.ndarray | None = None):
        if not self.specs:
            return None, float(np.sum(self.residuals(np.array([]), idx) ** 2))
        lo, hi = self.bounds()

        def run(theta0, budget):
            theta0 = np.clip(theta0, lo + 1e-12, hi - 1e-12)
            try:
                return least_squares(self.residuals, theta0, bounds=(lo, hi), args=(idx,),
                                     x_scale="jac", max_nfev=budget)
            except (ValueError, FloatingPointError):
                return None

        best = None
        # Short runs from every start (the kinks of min() can make a run zigzag), then polish the best.
        for start in starts:
            res = run(self.to_theta(start), 60 if len(starts) > 1 else 300)
            if res is not None and (best is None or res.cost < best.cost):
                best = res
        if best is not None and best.status == 0 and len(starts) > 1:
            polished = run(best.x, 300)
            if polished is not None and polished.cost <= best.cost:
                best = polished
        if best is None:
            return None, math.inf
        return best, float(2 * best.cost)


def _median(values: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in values if x is not None and math.isfinite(float(x)) and float(x) > 0]
    return statistics.median(vals) if vals else None


def _device_mbps(points: list[Point]) -> float | None:
    for key in DEVICE_MBPS_KEYS:
        value = _median(p.extra.get(key) for p in points if isinstance(p.extra, dict))
        if value:
            return value
    return None


def _variant_key(points: list[Point]) -> dict[int, str]:
    """Name groups by workload, adding profile/decode/input only where one workload has several."""
    by_workload: dict[str, list[Point]] = {}
    for p in points:
        by_workload.setdefault(p.workload, []).append(p)
    names: dict[int, str] = {}
    for workload, pts in by_workload.items():
        real = [p for p in pts if p.input != SYNTHETIC_INPUT]
        dims = []
        for attr in ("profile", "decode", "input"):
            if len({getattr(p, attr) or "" for p in real}) > 1:
                dims.append(attr)
        for p in pts:
            if p.input == SYNTHETIC_INPUT or not dims:
                names[id(p)] = workload
            else:
                tag = ",".join(f"{a}={getattr(p, a) or '-'}" for a in dims)
                names[id(p)] = f"{workload}[{tag}]"
    return names


def group_points(points: list[Point]) -> dict[str, list[Point]]:
    """Points per fitted workload; synthetic-input points join every variant of their workload
    that decodes on the CPU. A variant decoding on the GPU does not get them: decoding takes GPU
    time from training, so the rate with input already on the device does not bound it; its own
    ceiling is fitted from its points (seen on an H200: nvjpeg training levelled off at about 3,000
    images/s from 2 vCPUs up, against 4,673 with input on the device)."""
    names = _variant_key(points)
    groups: dict[str, list[Point]] = {}
    gpu_decoded: set[str] = set()
    for p in points:
        if p.input != SYNTHETIC_INPUT:
            groups.setdefault(names[id(p)], []).append(p)
            if p.decode == "gpu":
                gpu_decoded.add(names[id(p)])
    for p in points:
        if p.input == SYNTHETIC_INPUT:
            targets = [g for g in groups if (g == p.workload or g.startswith(p.workload + "[")) and g not in gpu_decoded]
            targets = targets or ([p.workload] if p.workload not in gpu_decoded else [])
            for g in targets:
                groups.setdefault(g, []).append(p)
    return groups


# A point whose vCPUs were at least this busy (CPU util per vCPU) is CPU-bound: its rate follows the
# speed the shared host gave its CPUs at that moment.
BUSY_CPU_UTIL = 0.85


def window_cpu_speed(point: Point) -> float | None:
    """Samples per CPU-second in the point's measured window (1 / its CPU time per sample), if known."""
    ms = point.extra.get("cpu_ms_per_sample")
    return 1000.0 / ms if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0 else None


def scale_busy_points(points: list[Point], speed, *, by_vcpus: bool = False,
                      reference_all: bool = False) -> list[Point]:
    """The host's changing speed taken out of CPU-bound figures: a copy of `points` in which every
    busy point's rate is divided by its speed (`speed(p)`, None where unknown) relative to the median
    speed of its workload's busy points (of all its points with a speed: `reference_all`), or of those
    at its vCPU count (`by_vcpus`, which keeps what more vCPUs cost per sample in the figures). A
    scaled point is a new one with its factor in `extra["speed_scale"]`; the points given stay as
    they are."""
    factors: dict[int, float] = {}
    for group in group_points(points).values():
        measured = [p for p in group if speed(p)]
        busy = [p for p in measured if (p.cpu_util_per_vcpu or 0.0) >= BUSY_CPU_UTIL]
        references: dict[Any, list[float]] = {}
        for p in measured if reference_all else busy:
            references.setdefault(p.vcpus if by_vcpus else None, []).append(speed(p))
        for p in busy:  # a synthetic-input point joins several groups: scaled once
            factors.setdefault(id(p), statistics.median(references[p.vcpus if by_vcpus else None]) / speed(p))
    return [dataclasses.replace(p, throughput=p.throughput * f, extra={**p.extra, "speed_scale": f})
            if (f := factors.get(id(p))) is not None else p for p in points]


def take_out_cpu_cost(points: list[Point]) -> list[Point]:
    """Busy points scaled by their own window's CPU time per sample over the median of the busy points
    at their vCPU count (`fit_points(cpu_cost=True)`, `sizer report --cpu-cost`). Measured at the
    same moment as the rate, it says how fast the shared host ran that window; a shape that really
    costs more CPU per sample than others at its vCPU count is evened out with them too, which the
    model, one CPU term per workload, could not tell apart anyway."""
    return scale_busy_points(points, window_cpu_speed, by_vcpus=True)


def _cpu_cost_note(group: list[Point]) -> str:
    """The fit's note on what `cpu_cost` changed in one workload's measurements."""
    factors = [p.extra["speed_scale"] for p in group if "speed_scale" in p.extra]
    if not factors:
        return "fitted with --cpu-cost: no CPU-bound point with its window's CPU time, so every figure is as measured"
    return (f"fitted with --cpu-cost: {len(factors)} CPU-bound measurement(s) scaled by their window's CPU "
            f"time per sample over the median at their vCPU count (x{min(factors):.2f} to x{max(factors):.2f}), "
            f"taking the shared host's changing speed out; the points shown are as measured")


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
    for name, group in group_points(combine_passes(points)).items():
        fit = _fit_workload(name, group, disk_classes, dataset_gib, disk_mbps or {}, loo, smooth)
        if fit is not None:
            real = [p for p in group if p.usable and p.input != SYNTHETIC_INPUT]
            fit.reads_once = bool(real) and all(p.reads_once for p in real)
            if fit.reads_once:
                fit.notes.append("reads each sample once: RAM beyond the workload's footprint cannot lift a "
                                 "disk bound (no later pass finds the data in the page cache)")
            if cpu_cost:
                fit.notes.append(_cpu_cost_note(scaled.get(name, [])))
            fits[name] = fit
    return fits


def _fit_workload(name, group, disk_classes, dataset_gib, disk_mbps, do_loo, smooth) -> WorkloadFit | None:
    usable = [p for p in group if p.usable]
    if not usable:
        return None
    synthetic = [p for p in usable if p.input == SYNTHETIC_INPUT]
    real = [p for p in usable if p.input != SYNTHETIC_INPUT]
    oom = [p for p in group if p.status == "oom" and p.input != SYNTHETIC_INPUT]
    unit = Counter(p.unit for p in usable).most_common(1)[0][0]
    notes: list[str] = []
    params: dict[str, Param] = {}

    # ---------------------------------------------------------- measured quantities
    g_meas = _median(p.throughput for p in synthetic)
    b_meas = _median(p.read_mb_per_sample for p in real)
    f_meas = _median(p.footprint_gib for p in real)
    d_meas = _median(p.dataset_gib for p in real)
    if oom:
        worst = max(p.ram_gib for p in oom)
        if f_meas is None or worst > f_meas:
            notes.append(f"{len(oom)} shape(s) ran out of memory, up to {worst:g} GiB: footprint at least that")
            f_meas = worst
    calibration = _median(p.calibration_ips for p in usable)

    # ---------------------------------------------------------- disk bandwidth per class
    device = _device_mbps(real)
    bandwidth: dict[str, float | None] = {}
    for cls in sorted({p.disk_class for p in real}):
        if cls in disk_mbps:
            bandwidth[cls] = float(disk_mbps[cls])
            params[f"disk_{cls}_mbps"] = Param(f"disk_{cls}_mbps", bandwidth[cls], None, None, "MB/s", "fio",
                                               note="fio-measured read bandwidth")
        elif cls in disk_classes and disk_classes[cls].read_mbps is not None:
            bandwidth[cls] = float(disk_classes[cls].read_mbps)
            params[f"disk_{cls}_mbps"] = Param(f"disk_{cls}_mbps", bandwidth[cls], None, None, "MB/s",
                                               "disk-class", note="read cap of the disk class")
        elif device is not None and (cls in disk_classes or cls == "local-nvme"):
            bandwidth[cls] = device
            params[f"disk_{cls}_mbps"] = Param(f"disk_{cls}_mbps", device, None, None, "MB/s", "fio",
                                               note="unthrottled: the measured device's own read bandwidth")
        else:
            bandwidth[cls] = None
            if cls not in disk_classes and cls != "local-nvme":
                notes.append(f"disk class {cls!r} is not in the disk-class table: treated as unthrottled")
    if "local-nvme" in bandwidth and bandwidth["local-nvme"] is None:
        notes.append("local-nvme (unthrottled) has no disk bound in the model: no device bandwidth was measured")

    v = np.array([p.vcpus for p in real], dtype=float)
    m = np.array([_cache_ram(p, b_meas, f_meas, d_meas) for p in real], dtype=float)
    bw = np.array([np.nan if bandwidth[p.disk_class] is None else bandwidth[p.disk_class] for p in real], dtype=float)
    y = np.array([p.throughput for p in real], dtype=float)
    throttled = np.isfinite(bw)

    if not real:
        # Only GPU-ceiling points: nothing is known of the CPU or disk side.
        fixed = {"G": g_meas, "c": g_meas, "s": 0.0, "k": 0.0, "b": 0.0, "F": f_meas or 0.0,
                 "D": d_meas or 0.0, "p": 0.0}
        notes.append("only synthetic-input points: the CPU and disk terms are not measured")
        return _assemble(name, unit, fixed, {}, None, synthetic, real, [], params, notes, calibration,
                         dataset_gib, d_meas, g_meas, b_meas, f_meas, usable, free_keys=set(), loo_preds=None)

    # ---------------------------------------------------------- initial guesses
    vmin = v.min()
    c0 = float(np.median(y[v == vmin] / v[v == vmin]))
    g0 = g_meas if g_meas else float(y.max()) * 1.02
    d0 = d_meas if d_meas else None
    f0 = f_meas if f_meas is not None else 0.0
    # Every point measured, and none read anything from the disk (a corpus loaded onto the device
    # before the window): the disk does not bound this job, whatever its class.
    reads = [p.read_mb_per_sample for p in real if p.read_mb_per_sample is not None]
    reads_nothing = len(reads) == len(real) and max(reads) <= 0.0
    if b_meas:
        b0 = b_meas
    elif reads_nothing:
        b0 = 0.0
    elif throttled.any():
        miss0 = np.ones_like(m) if not d0 else np.clip(1 - (m - f0) / d0, 0.05, 1)
        b0 = float(np.min(bw[throttled] / (y[throttled] * miss0[throttled])))
    else:
        b0 = 0.0

    # ---------------------------------------------------------- which parameters are free
    # The GPU ceiling is measured where synthetic-input points exist (input already on the device),
    # fitted otherwise.
    free = {"c", "s", "k"} | (set() if g_meas else {"G"})
    if not b_meas and not reads_nothing and throttled.any():
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
    if d_meas is None and ram_levels >= 2 and "b" in free:
        free.add("D")
        d0 = float(m.max()) * 1.5
    if f_meas is None and d_meas is not None and ram_levels >= 2 and throttled.any():
        free.add("F")
    values0 = {"G": g0, "c": max(c0, 1e-9), "s": 0.02 if "s" in free else 0.0, "k": 0.0005 if "k" in free else 0.0,
               "b": max(b0, 0.0), "F": f0, "D": d0 or 0.0, "p": 0.0}

    # Fit in units of the median rate: the problem (and so its solution) does not depend on the unit,
    # and doubling every measurement exactly doubles the fitted rates.
    scale = float(np.median(y))
    y = y / scale
    values0 = _rescale(values0, 1.0 / scale)
    fit_values, free, problem = _fit_with_identifiability(v, m, bw, y, values0, free, notes, pre_notes)

    # ---------------------------------------------------------- choose min or smooth minimum
    loo_preds = None
    model_kind = "min"
    if do_loo and len(y) >= _MIN_LOO_POINTS:
        loo_preds = _leave_one_out(problem, fit_values)
        want_smooth = smooth if smooth is not None else len(y) >= len(problem.specs) + 5
        if want_smooth:
            smooth_problem = _with_sharpness(problem)
            res, smooth_cost = smooth_problem.solve([dict(fit_values, p=8.0), dict(fit_values, p=3.0)])
            min_cost = float(np.sum(problem.residuals(problem.to_theta(fit_values)) ** 2))
            # Only a clearly better in-sample fit is worth the leave-one-out comparison.
            if res is not None and smooth_cost < 0.7 * min_cost:
                smooth_values = smooth_problem.values(res.x)
                smooth_loo = _leave_one_out(smooth_problem, smooth_values)
                err_min = _ape_stats(loo_preds, y)[0]
                err_smooth = _ape_stats(smooth_loo, y)[0]
                if smooth or (err_smooth < 0.75 * err_min and err_min - err_smooth > 0.005
                              and _physical(smooth_values, fit_values)):
                    fit_values, problem, loo_preds, model_kind = smooth_values, smooth_problem, smooth_loo, "softmin"
                    free = free | {"p"}
                    notes.append("a smooth minimum near the knee predicted held-out shapes better than min()")
    elif smooth:
        smooth_problem = _with_sharpness(problem)
        res, _ = smooth_problem.solve(_starts(dict(fit_values, p=8.0), smooth_problem))
        if res is not None:
            fit_values, problem, model_kind = smooth_problem.values(res.x), smooth_problem, "softmin"
            free = free | {"p"}

    final_res, _ = problem.solve([fit_values]) if problem.specs else (None, 0.0)
    if final_res is not None:
        fit_values = problem.values(final_res.x)
    fit_values = _rescale(fit_values, scale)
    if loo_preds is not None:
        loo_preds = [x * scale for x in loo_preds]
    fit = _assemble(name, unit, fit_values, bandwidth, final_res, synthetic, real, problem.specs, params, notes,
                    calibration, dataset_gib, d_meas, g_meas, b_meas, f_meas, usable, free_keys=free,
                    loo_preds=loo_preds, problem=problem, scale=scale)
    fit.model = model_kind
    return fit


def _rescale(values: dict[str, float], factor: float) -> dict[str, float]:
    """Rates (G, c) times `factor`; bytes per sample divided by it (X_io = B / (b * miss))."""
    return dict(values, G=values["G"] * factor, c=values["c"] * factor, b=values["b"] / factor)


def _specs_for(free: set[str], values: dict[str, float], m: np.ndarray) -> list[_Spec]:
    specs = []
    order = ["G", "c", "s", "k", "b", "F", "D", "p"]
    for key in order:
        if key not in free:
            continue
        if key == "G":
            specs.append(_Spec("G", 1e-9, 1e12, True))
        elif key == "c":
            specs.append(_Spec("c", 1e-9, 1e12, True))
        elif key == "s":
            specs.append(_Spec("s", 0.0, 1.0, False))
        elif key == "k":
            specs.append(_Spec("k", 0.0, 0.5, False))
        elif key == "b":
            specs.append(_Spec("b", 1e-9, 1e9, True))
        elif key == "F":
            specs.append(_Spec("F", 0.0, max(float(m.min()), 1e-6), False))
        elif key == "D":
            specs.append(_Spec("D", 1e-3, 1e7, True))
        elif key == "p":
            specs.append(_Spec("p", 1.0, 64.0, False))
    return specs


def _starts(values: dict[str, float], problem: _Problem) -> list[dict[str, float]]:
    keys = {sp.key for sp in problem.specs}
    starts = [dict(values)]
    if "s" in keys or "k" in keys:
        for s0, k0 in ((0.0, 0.0), (0.1, 0.0), (0.02, 0.005), (0.3, 0.01)):
            starts.append(dict(values, s=s0, k=k0))
    if "G" in keys:
        starts.append(dict(values, G=values["G"] * 1.3))
    if "D" in keys and values.get("D"):
        starts += [dict(values, D=values["D"] * f) for f in (0.6, 2.0, 5.0)]
    if "b" in keys and values.get("b"):
        starts += [dict(values, b=values["b"] * f) for f in (0.7, 1.5)]
    return starts


def _fit_with_identifiability(v, m, bw, y, values0, free, notes, pre_notes=None):
    """Fit, then fix what the binding pattern cannot identify and fit again (a few rounds at most).

    Parameters without any binding point (the GPU ceiling never reached, no CPU-bound shape) are
    settled first; what the remaining pattern can identify (USL terms, RAM effect) is judged on the
    refit, so one bad first fit does not throw a parameter away.
    """
    values = dict(values0)
    fixed_notes: dict[str, str] = dict(pre_notes or {})

    def make_problem() -> _Problem:
        # Never more free parameters than observations.
        for key in ("k", "s", "F", "D", "b", "G", "c"):
            if len(free) <= len(y):
                break
            if key in free:
                free.discard(key)
                fixed_notes.setdefault(key, "fewer points than parameters: held fixed")
        fixed = {k: values[k] for k in values if k not in free}
        return _Problem(v, m, bw, y, fixed, _specs_for(free, values, m))

    problem = make_problem()
    for round_ in range(6):
        # A wide search first; later rounds start from where the previous one ended.
        res, _ = problem.solve(_starts(values, problem) if round_ == 0 else [values])
        if res is not None:
            values = problem.values(res.x)
        binding = _binding(values, v, m, bw)
        cpu_levels = len(set(v[binding == "cpu"].tolist()))
        io_mask = binding == "io"
        io_ram_levels = len(set(m[io_mask].tolist()))
        changed = False
        if "G" in free and not (binding == "gpu").any():
            free.discard("G")
            _, terms = _evaluate(values, v, m, bw)
            # The best the fitted terms reach over the measured shapes, not the highest point: the
            # highest of many noisy points overstates the level they share (30 flat ptb-lstm-train
            # points of 90,000 to 129,000 tokens/s would have put the ceiling at the outlier).
            values["G"] = float(np.max(np.minimum(terms["cpu"], terms["io"])))
            fixed_notes["G"] = "the GPU ceiling was not reached in any measured shape: the value is a lower bound"
            changed = True
        if cpu_levels == 0 and "c" in free:
            for key in ("c", "s", "k"):
                free.discard(key)
            values["s"] = values["k"] = 0.0
            values["c"] = float(np.max(y / v))
            fixed_notes["c"] = "no shape was CPU-bound: per-vCPU rate is a lower bound (the highest seen per vCPU)"
            changed = True
        if not changed:
            if cpu_levels < 3 and "k" in free:
                free.discard("k")
                values["k"] = 0.0
                fixed_notes["k"] = f"CPU-bound at {cpu_levels} vCPU level(s): contention (kappa) not identifiable, set to 0"
                changed = True
            if cpu_levels < 2 and "s" in free:
                free.discard("s")
                values["s"] = 0.0
                fixed_notes["s"] = (f"CPU-bound at {cpu_levels} vCPU level(s): serial fraction (sigma) not "
                                    "identifiable, set to 0")
                changed = True
            if "b" in free and not io_mask.any():
                free.discard("b")
                if "D" in free:  # no disk-bound shape: the dataset size cannot be told either
                    free.discard("D")
                    values["D"] = 0.0
                    fixed_notes["D"] = ("dataset size not measured and no shape was disk-bound: the RAM "
                                        "(page-cache) effect is not modelled")
                ok = np.isfinite(bw)
                miss = _miss(values, m)
                with np.errstate(divide="ignore"):
                    bounds = bw[ok] / (y[ok] * np.maximum(miss[ok], 1e-9))
                values["b"] = float(np.min(bounds)) if bounds.size else 0.0
                fixed_notes["b"] = ("no shape was disk-bound: bytes per sample is an upper bound (the most the "
                                    "slowest measured disk could have fed)")
                changed = True
            if "D" in free and io_ram_levels < 2:
                free.discard("D")
                if io_ram_levels == 0 or "b" not in free:
                    values["D"] = 0.0
                    fixed_notes["D"] = ("dataset size not measured and no shape was disk-bound: the RAM "
                                        "(page-cache) effect is not modelled")
                else:
                    fixed_notes["D"] = ("disk-bound at one RAM level only: the dataset size is only bounded "
                                        "by the points; held at the fitted value")
                changed = True
            if "F" in free and io_ram_levels < 2:
                free.discard("F")
                fixed_notes["F"] = ("disk-bound at fewer than two RAM levels: the footprint is only bounded "
                                    "by the points; held at the fitted value")
                changed = True
        if not changed:
            break
        problem = make_problem()
    else:
        res, _ = problem.solve([values])
        if res is not None:
            values = problem.values(res.x)
    notes.extend(f"{_PARAM_INFO[k][0]}: {msg}" for k, msg in fixed_notes.items())
    problem.fixed_notes = fixed_notes  # type: ignore[attr-defined]
    return values, free, problem


def _cache_ram(point: Point, b_meas: float | None, f_meas: float | None, d_meas: float | None) -> float:
    """The RAM a point's page cache effectively had during its measured window.

    Every point starts cold for its dataset, so a window that ended inside the first pass over the
    data (the worker records `epochs` < 1) read everything from the disk whatever the RAM limit:
    miss = 1, which is the miss(m) of RAM = footprint. miss(m) itself describes later passes.
    """
    extra = point.extra or {}
    epochs = extra.get("epochs")
    if epochs is None and extra.get("images_total"):
        # A one-pass job (imagenet-preprocess) stored before it recorded `epochs`: its share of the pass.
        epochs = float(extra.get("images_done") or 0) / float(extra["images_total"])
    if isinstance(epochs, (int, float)) and epochs < 1 and f_meas is not None and d_meas:
        return min(point.ram_gib, f_meas)
    return point.ram_gib


def _miss(values, m):
    if values["D"] > 0:
        return np.clip(1.0 - (m - values["F"]) / values["D"], 0.0, 1.0)
    return np.ones_like(m)


def _physical(smooth_values: dict[str, float], min_values: dict[str, float]) -> bool:
    """A smooth minimum may move the knee, not the physics: every parameter stays near its min() fit."""
    for key in ("G", "c", "b"):
        a, b = smooth_values.get(key, 0.0), min_values.get(key, 0.0)
        if b > 0 and not 0.8 <= a / b <= 1.25:
            return False
    return True


def _with_sharpness(problem: _Problem) -> _Problem:
    specs = list(problem.specs) + [_Spec("p", 1.0, 64.0, False)]
    fixed = {k: v for k, v in problem.fixed.items() if k != "p"}
    out = _Problem(problem.v, problem.m, problem.bw, problem.y, fixed, specs)
    out.fixed_notes = getattr(problem, "fixed_notes", {})  # type: ignore[attr-defined]
    return out


def _leave_one_out(problem: _Problem, values: dict[str, float]) -> list[float]:
    n = len(problem.y)
    preds = []
    everything = np.arange(n)
    for i in range(n):
        idx = everything[everything != i]
        if problem.specs:
            res, _ = problem.solve([values], idx)
            vals = problem.values(res.x) if res is not None else values
        else:
            vals = values
        x, _ = _evaluate(vals, problem.v[i:i + 1], problem.m[i:i + 1], problem.bw[i:i + 1])
        preds.append(float(x[0]))
    return preds


def _ape_stats(preds: list[float], y: np.ndarray) -> tuple[float, float]:
    ape = np.abs(np.array(preds) - y) / y
    return float(np.median(ape)), float(np.max(ape))


def _assemble(name, unit, values, bandwidth, res, synthetic, real, specs, params, notes, calibration,
              dataset_gib, d_meas, g_meas, b_meas, f_meas, usable, free_keys, loo_preds, problem=None, scale=1.0):
    fixed_notes = getattr(problem, "fixed_notes", {}) if problem is not None else {}
    intervals = _intervals(res, specs, len(real)) if res is not None else {}
    for key, factor in (("G", scale), ("c", scale), ("b", 1.0 / scale)):
        low, high = intervals.get(key, (None, None))
        if low is not None:
            intervals[key] = (low * factor, high * factor)

    def param(key: str, unit_: str, source: str, note: str = "", low=None, high=None, identifiable=True):
        public = _PARAM_INFO[key][0]
        params[public] = Param(public, float(values[key]), low, high, unit_, source, identifiable, note)

    def fitted(key: str, unit_: str):
        low, high = intervals.get(key, (None, None))
        ident = low is not None
        param(key, unit_, "fit", "" if ident else "interval not identifiable from these points",
              low, high, ident)

    # GPU ceiling
    gpu_bound = 0
    if real:
        v_ = np.array([p.vcpus for p in real], dtype=float)
        m_ = np.array([_cache_ram(p, b_meas, f_meas, d_meas) for p in real], dtype=float)
        bw_ = np.array([np.nan if bandwidth.get(p.disk_class) is None else bandwidth[p.disk_class] for p in real])
        gpu_bound = int(np.sum(_binding(values, v_, m_, bw_) == "gpu"))
    if g_meas:
        tps = [p.throughput for p in synthetic]
        spreads = [p.spread or 0.0 for p in synthetic]
        low = min(t * (1 - s / 2) for t, s in zip(tps, spreads))
        high = max(t * (1 + s / 2) for t, s in zip(tps, spreads))
        if high - low <= 1e-9 * max(abs(high), 1.0):
            low = high = None  # one point without a spread: no interval to give
        param("G", unit, "measured", f"{len(tps)} synthetic-input point(s) (input already on the device)", low, high)
        if gpu_bound:
            at_ceiling = [p.throughput for p, is_gpu in zip(real, _binding(values, v_, m_, bw_) == "gpu") if is_gpu]
            ratio = statistics.median(at_ceiling) / values["G"]
            if abs(ratio - 1) > max(0.03, 2 * max(spreads)):
                notes.append(f"the {gpu_bound} GPU-bound shape(s) ran at {ratio:.0%} of the synthetic-input ceiling: "
                             "the input pipeline costs the GPU time, or the ceiling point was noisy")
    elif "G" in free_keys:
        fitted("G", unit)
    else:
        param("G", unit, "fixed", fixed_notes.get("G", "not identifiable"), identifiable=False)
    # CPU side
    per_vcpu_unit = f"{unit}/vCPU"
    for key, unit_ in (("c", per_vcpu_unit), ("s", ""), ("k", "")):
        if key in free_keys:
            fitted(key, unit_)
        else:
            param(key, unit_, "fixed", fixed_notes.get(key, "not identifiable"), identifiable=False)
    # I/O side
    if b_meas:
        vals = [p.read_mb_per_sample for p in real if p.read_mb_per_sample]
        lo_b, hi_b = (min(vals), max(vals)) if max(vals) > min(vals) else (None, None)
        param("b", "MB", "measured", f"median read per sample over {len(vals)} point(s)", lo_b, hi_b)
    elif "b" in free_keys:
        fitted("b", "MB")
    else:
        param("b", "MB", "fixed", fixed_notes.get("b", "no disk-class points and no read-bytes measurement: "
                                                  "the disk is not modelled"), identifiable=False)
    if f_meas is not None and values["F"] == f_meas:
        vals = [p.footprint_gib for p in real if p.footprint_gib]
        spread = bool(vals) and max(vals) > min(vals)
        param("F", "GiB", "measured", "peak resident memory of the workload" if vals else
              "at least the largest RAM limit that ran out of memory",
              min(vals) if spread else None, max(vals) if spread else None)
    elif "F" in free_keys:
        fitted("F", "GiB")
    else:
        param("F", "GiB", "fixed", fixed_notes.get("F", "footprint not measured: set to 0"), identifiable=False)
    # Dataset: the model's prediction uses the real size when stated.
    if d_meas is not None:
        params["measured_dataset_gib"] = Param("measured_dataset_gib", d_meas, None, None, "GiB", "measured",
                                               note="dataset size used in the sweep")
    elif "D" in free_keys:
        low, high = intervals.get("D", (None, None))
        params["measured_dataset_gib"] = Param("measured_dataset_gib", float(values["D"]), low, high, "GiB",
                                               "fit", low is not None, "fitted from the RAM levels")
    elif values["D"] > 0:
        params["measured_dataset_gib"] = Param("measured_dataset_gib", float(values["D"]), None, None, "GiB",
                                               "fixed", False, fixed_notes.get("D", "not identifiable"))
    measured_d = params["measured_dataset_gib"].value if "measured_dataset_gib" in params else None
    if dataset_gib is not None and measured_d:
        params["dataset_gib"] = Param("dataset_gib", float(dataset_gib), None, None, "GiB", "fixed",
                                      note=f"stated real dataset; RAM axis rescaled from {measured_d:.3g} GiB measured")
        values = dict(values, D=float(dataset_gib))
    elif measured_d:
        src = params["measured_dataset_gib"].source
        params["dataset_gib"] = Param("dataset_gib", float(measured_d), params["measured_dataset_gib"].low,
                                      params["measured_dataset_gib"].high, "GiB", src,
                                      note="dataset as measured (pass --dataset-gib for the real one)")
    else:
        params["dataset_gib"] = Param("dataset_gib", 0.0, None, None, "GiB", "fixed", False,
                                      fixed_notes.get("D", "dataset size unknown: the RAM effect is not modelled"))
        if dataset_gib is not None:
            notes.append("--dataset-gib ignored: the measured dataset size is unknown, so the RAM axis cannot be rescaled")
    if "p" in free_keys:
        fitted("p", "")
        params["knee_sharpness"].note = "p of the smooth minimum (X = sum(term^-p)^(-1/p)); larger is sharper"

    # Residuals (in sample) and leave-one-out.
    in_sample_values = dict(values, D=params["measured_dataset_gib"].value if "measured_dataset_gib" in params
                            else values["D"])
    residuals: list[tuple[Point, float]] = []
    if real:
        v = np.array([p.vcpus for p in real], dtype=float)
        m = np.array([_cache_ram(p, b_meas, f_meas, d_meas) for p in real], dtype=float)
        bw = np.array([np.nan if bandwidth.get(p.disk_class) is None else bandwidth[p.disk_class] for p in real])
        x, _ = _evaluate(in_sample_values, v, m, bw)
        residuals = [(p, float(xi)) for p, xi in zip(real, x)]
    loo_pairs: list[tuple[Point, float]] = []
    loo_med = loo_max = None
    if loo_preds is not None:
        loo_pairs = list(zip(real, loo_preds))
        loo_med, loo_max = _ape_stats(loo_preds, np.array([p.throughput for p in real]))
    gpu_models = Counter(p.gpu_model for p in usable if p.gpu_model)
    gpu_mem = _median(p.extra.get("gpu_mem_peak_gib") for p in usable if isinstance(p.extra, dict))
    return WorkloadFit(
        workload=name,
        unit=unit,
        params=params,
        n_points=len(usable),
        loo_median_ape=loo_med,
        loo_max_ape=loo_max,
        residuals=residuals,
        calibration_ips=calibration,
        loo=loo_pairs,
        gpu_model=gpu_models.most_common(1)[0][0] if gpu_models else "",
        gpu_memory_gib=gpu_mem,
        notes=notes,
        uses_gpu=any(p.gpu_util_pct is not None for p in usable),
    )


def _intervals(res, specs: list[_Spec], n: int) -> dict[str, tuple[float | None, float | None]]:
    """95% intervals from the Jacobian at the optimum (Gauss-Newton covariance)."""
    out: dict[str, tuple[float | None, float | None]] = {}
    p = len(specs)
    if res is None or p == 0:
        return out
    jac = np.asarray(res.jac, dtype=float)
    dof = res.fun.size - p
    if dof <= 0:
        return {sp.key: (None, None) for sp in specs}
    sigma2 = float(np.sum(res.fun ** 2)) / dof
    jtj = jac.T @ jac
    try:
        cov = np.linalg.inv(jtj) * sigma2
    except np.linalg.LinAlgError:
        return {sp.key: (None, None) for sp in specs}
    for i, sp in enumerate(specs):
        var = cov[i, i]
        col = jac[:, i]
        if not np.isfinite(var) or var < 0 or not np.any(col):
            out[sp.key] = (None, None)
            continue
        sd = math.sqrt(var)
        x = res.x[i]
        if sp.log:
            if Z95 * sd > 20:  # wider than e^20: no information
                out[sp.key] = (None, None)
                continue
            out[sp.key] = (float(math.exp(x - Z95 * sd)), float(math.exp(x + Z95 * sd)))
        else:
            out[sp.key] = (float(max(sp.low, x - Z95 * sd)), float(min(sp.high, x + Z95 * sd)))
    return out


def shape_of(point: Point) -> tuple:
    """The (vCPUs, RAM, disk class) a point was measured at: what leave-one-shape-out holds out."""
    return (point.vcpus, point.ram_gib, point.disk_class)


def fit_group(name: str, group: list[Point], disk_classes: dict[str, DiskClass], loo: bool = True) -> WorkloadFit | None:
    """The fit of one workload group (`group_points`): fitted alone, a group carries its workload's
    plain name, so the one fit it gives is taken whatever it is called."""
    fits = fit_points(group, disk_classes, loo=loo)
    return fits.get(name) or (next(iter(fits.values())) if len(fits) == 1 else None)


def held_out_errors(name: str, group: list[Point], disk_classes: dict[str, DiskClass], hold=shape_of) -> dict[Any, list[float]]:
    """The absolute relative errors of the points of each key `hold(point)` (a shape by default)
    when the group is fitted without them: how well the model predicts what it did not see.
    Synthetic-input points stay in every fit (they are not shapes); a key whose removal leaves
    fewer than two real points to fit on gets no errors. Compared on the measured dataset."""
    usable = [p for p in group if p.usable]
    real = [p for p in usable if p.input != SYNTHETIC_INPUT]
    errors: dict[Any, list[float]] = {}
    for key in sorted({hold(p) for p in real}, key=str):
        train = [p for p in usable if p.input == SYNTHETIC_INPUT or hold(p) != key]
        if sum(p.input != SYNTHETIC_INPUT for p in train) < 2:
            continue
        fit = fit_group(name, train, disk_classes, loo=False)
        if fit is None:
            continue
        for p in real:
            if hold(p) == key:
                predicted = fit.predict_measured(p)
                errors.setdefault(key, []).append(abs(predicted.throughput - p.throughput) / p.throughput)
    return errors


def worst_predicted(points: list[Point], disk_classes: dict[str, DiskClass], n: int) -> list[tuple[Point, float]]:
    """Each fitted workload's `n` shapes that its model predicts worst when fitted without them
    (leave-one-shape-out, each shape at the median of its measurements): the point that stands for
    each shape (`combine_passes`: the median measurement) with its error, largest first within a
    workload. What `sizer sweep --refine` measures once more."""
    if n < 1:
        raise SizerError(f"--refine wants 1 or more shapes, got {n}")
    out: list[tuple[Point, float]] = []
    for name, group in group_points(combine_passes(points)).items():
        errors = held_out_errors(name, group, disk_classes)
        ranked = sorted(errors, key=lambda key: max(errors[key]), reverse=True)[:n]
        real = [p for p in group if p.usable and p.input != SYNTHETIC_INPUT]
        for key in ranked:
            out.append((next(p for p in real if shape_of(p) == key), max(errors[key])))
    return out


def simulate_points(
    workload: str,
    truth: dict[str, float],
    vcpus: Iterable[int],
    disks: dict[str, float | None],
    rams: Iterable[float],
    unit: str = "images/s",
    noise: float = 0.0,
    seed: int = 0,
    synthetic: bool = True,
    measured: Iterable[str] = ("bytes_per_sample", "footprint_gib", "dataset_gib"),
    gpu_model: str = "",
) -> list[Point]:
    """Points the model itself would produce for known parameters, with multiplicative Gaussian noise.

    `truth` uses the public names (gpu_ceiling, per_vcpu, usl_sigma, usl_kappa, bytes_per_sample,
    footprint_gib, dataset_gib); `disks` maps a disk class to its read MB/s (None = unthrottled).
    `measured` names the quantities the points carry, as a sweep records them. For tests and
    benchmarks of the fitting itself: a known answer to recover.
    """
    rng = np.random.default_rng(seed)
    values = {key: float(truth.get(public, 0.0)) for key, (public, _) in _PARAM_INFO.items()}
    measured = set(measured)
    points = []
    for v in vcpus:
        for disk, mbps in disks.items():
            for ram in rams:
                x, _ = _evaluate(values, np.array([float(v)]), np.array([float(ram)]),
                                 np.array([np.nan if mbps is None else float(mbps)]))
                y = float(x[0]) * (1.0 + noise * rng.standard_normal())
                points.append(Point(
                    workload, int(v), float(ram), disk, max(y, 1e-9), unit,
                    read_mb_per_sample=values["b"] if "bytes_per_sample" in measured else None,
                    footprint_gib=values["F"] if "footprint_gib" in measured else None,
                    dataset_gib=values["D"] if "dataset_gib" in measured else None,
                    gpu_model=gpu_model,
                ))
    if synthetic:
        g = values["G"] * (1.0 + noise * rng.standard_normal())
        points.append(Point(workload, int(max(vcpus)), float(max(rams)), next(iter(disks)), g, unit,
                            input=SYNTHETIC_INPUT, gpu_model=gpu_model))
    return points
