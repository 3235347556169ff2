"""The bottleneck equations, vectorised over shapes.

    X(v, m, d) = min( X_gpu,
                      X_cpu(v)   = c * v / (1 + s*(v-1) + k*v*(v-1)),      Universal Scalability Law
                      X_io(d, m) = B_d / (bytes_per_sample * miss(m)) )
    miss(m)    = clamp(1 - (m - footprint) / dataset, 0, 1)                 page-cache miss fraction

A parameter set is a dict over the model keys of `PARAM_NAMES`; a smooth minimum (a p-norm of the
terms) replaces `min` where the knee sharpness `p` is above 0.
"""

from __future__ import annotations

import numpy as np

from sizer.points import Point

# Model key -> the public name of its parameter (`Param.name`), in the order the fit lists them.
PARAM_NAMES = {
    "G": "gpu_ceiling",
    "c": "per_vcpu",
    "s": "usl_sigma",
    "k": "usl_kappa",
    "b": "bytes_per_sample",
    "F": "footprint_gib",
    "D": "dataset_gib",
    "p": "knee_sharpness",
}

# Where terms tie, the binding one is the first in this order: a GPU ceiling that was not reached is
# set at the level the other terms reach, and a tie with it means the other term binds.
TIE_ORDER = ("cpu", "io", "gpu")
_TIE_TOLERANCE = 1e-9


def miss_fraction(values: dict[str, float], m: np.ndarray) -> np.ndarray:
    """The share of samples read from the disk at page-cache RAM `m` (1 where the dataset is unknown)."""
    if values["D"] > 0:
        return np.clip(1.0 - (m - values["F"]) / values["D"], 0.0, 1.0)
    return np.ones_like(m)


def throughput_terms(values: dict[str, float], v: np.ndarray, m: np.ndarray,
                     bw: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Throughput and its gpu/cpu/io terms at vCPUs `v`, cache RAM `m` and read MB/s `bw` (NaN: an
    unthrottled disk); the io term is inf where the disk does not bound."""
    G, c, s, k, b, p = (values[key] for key in ("G", "c", "s", "k", "b", "p"))
    gpu = np.full(v.shape, G, dtype=float)
    cpu = c * v / (1.0 + s * (v - 1.0) + k * v * (v - 1.0))
    miss = miss_fraction(values, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        io = np.where(np.isfinite(bw) & (b > 0) & (miss > 0), bw / (b * miss), np.inf)
    return combine_terms(gpu, cpu, io, p), {"gpu": gpu, "cpu": cpu, "io": io}


def combine_terms(gpu: np.ndarray, cpu: np.ndarray, io: np.ndarray, p: float) -> np.ndarray:
    """The throughput the terms allow: their least, or their smooth minimum where `p` > 0."""
    if p > 0:
        # A term near zero overflows its power: the sum is then infinite and the rate 0, as it should be.
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            x = (gpu ** -p + cpu ** -p + io ** -p) ** (-1.0 / p)
        return np.nan_to_num(x, nan=0.0, posinf=0.0)
    return np.minimum(np.minimum(gpu, cpu), io)


def binding_terms(values: dict[str, float], v: np.ndarray, m: np.ndarray, bw: np.ndarray) -> np.ndarray:
    """The name of the lowest term at each shape, ties broken by `TIE_ORDER`."""
    _, terms = throughput_terms(values, v, m, bw)
    stacked = np.vstack([terms[k] * (1.0 + _TIE_TOLERANCE * i) for i, k in enumerate(TIE_ORDER)])
    return np.array(TIE_ORDER)[np.argmin(stacked, axis=0)]


def binding_term(terms: dict[str, float]) -> str:
    """The lowest of one shape's terms (those present), ties broken by `TIE_ORDER`."""
    return min((k for k in TIE_ORDER if k in terms),
               key=lambda k: terms[k] * (1.0 + _TIE_TOLERANCE * TIE_ORDER.index(k)))


def ram_to_lift_io(values: dict[str, float], bw: float | None, target: float) -> float | None:
    """RAM at which the page cache cuts disk reads enough for X_io to reach `target`."""
    b, F, D = values["b"], values["F"], values["D"]
    if bw is None or b <= 0 or D <= 0 or target <= 0:
        return None
    miss_needed = bw / (b * target)
    if miss_needed >= 1:
        return F
    return F + D * (1.0 - max(miss_needed, 0.0))


def cache_ram(point: Point, footprint_gib: float | None, dataset_gib: float | None) -> float:
    """The RAM a point's page cache effectively had during its measured window.

    Every point starts cold for its dataset, so a window that ended inside the first pass over the
    data (the worker records `epochs` < 1) read everything from the disk whatever the RAM limit:
    miss = 1, which is the miss(m) of RAM = footprint. miss(m) itself describes later passes.
    """
    epochs = point.epochs
    if epochs is not None and epochs < 1 and footprint_gib is not None and dataset_gib:
        return min(point.ram_gib, footprint_gib)
    return point.ram_gib


def cpu_scale(measured_calibration: float | None, target_calibration: float | None) -> float:
    """Factor for the CPU term on a host whose per-vCPU calibration differs from the measuring host."""
    if not measured_calibration or not target_calibration:
        return 1.0
    if measured_calibration <= 0 or target_calibration <= 0:
        return 1.0
    return float(target_calibration) / float(measured_calibration)
