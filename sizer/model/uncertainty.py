"""How far an answer can move: ranges drawn from the measurements' own spread.

A draw is one plausible re-measurement of the sweep, made from the measurements themselves:
- each measured shape's figure is the median of its passes drawn again with replacement; a shape
  measured once moves as far as the measurements bound by its term lie from the fitted curve (below)
  and within half its own sub-window spread: one measurement of a shared host can come at any of its
  speeds, and a window's own spread (a few percent) says nothing of the drift a second pass would show;
- the CPU term moves by a host-speed factor drawn from how far each measurement of a CPU-bound
  shape lay from the fitted curve, the disk and GPU terms likewise from the disk- and GPU-bound
  ones (too few of them: from every measurement).

A decision's range at confidence `c` is the point figure with the draws' spread around their median
(factors taken relative to their median): its pessimistic end moves by the draws' (1 - c) quantile,
its optimistic end by their c quantile, so at c = 0.5 both ends are the figure itself. A decision
holds the ceiling fixed: a shape bound by the GPU is at 100% of it in every draw. The model's range
of a *rate* at a shape (`model_range`) is what a measurement there would read: every term moved by
its factor as measured, between the (1 - c) and c quantiles. A term that the points only bound (a
ceiling or per-vCPU rate that is a lower bound, bytes per sample that are an upper bound) does not
cap the high end. The draws use a fixed seed: the same points give the same ranges.

Two more sources widen what the measurements' spread gives (`level_error`, `knee_range`):
- the host's speed over the sweep (`calibration["timeline"]`: every calibration repeat against the
  median of all), where recorded: the CPU factor at each end is the farther of the two, since both
  measure how far the shared host's speed moves;
- the model's own held-out error at the measured vCPU levels nearest a count nobody measured
  (`level_error.vcpu_band`), moving the CPU and disk terms and added in quadrature: at such a count
  the figure is the model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sizer.model.equations import combine_terms
from sizer.model.evidence import MeasuredShape, measured_shapes
from sizer.model.level_error import vcpu_band, widen
from sizer.model.tolerance import meets_tolerance
from sizer.model.types import Prediction, WorkloadFit

DRAWS = 400
SEED = 20_240_617
_MIN_POOL = 3  # fewer measurements than this bound by a term: its factor comes from all of them


@dataclass
class FitDraws:
    """A fit's draws (see the module): per draw, each measured shape's figure and the factors on
    the CPU and disk terms."""

    shapes: list[MeasuredShape]
    rates: np.ndarray  # (draws, shapes)
    cpu: np.ndarray  # (draws,): relative to the median
    io: np.ndarray  # (draws,): relative to the median
    measured: dict[str, np.ndarray]  # (draws,) per term "cpu", "io", "gpu": as measured against the fit
    cpu_open: bool  # the CPU term is only a lower bound
    io_open: bool  # the disk term is only a lower bound
    gpu_open: bool  # the ceiling is only a lower bound
    sharpness: float  # the smooth minimum's p (0: min)
    host: np.ndarray | None = None  # the host's speed over the sweep, relative to its median (timeline)
    ceiling_measured: bool = True  # measured with input on the device, not a plateau the model fitted

    def factor(self, confidence: float, pessimistic: bool) -> float:
        """The CPU factor at the pessimistic or the optimistic end of the range at `confidence`: of the
        measurements' spread and the host's speed over the sweep, the one farther out at that end."""
        q = 1 - confidence if pessimistic else confidence
        ends = [float(np.quantile(pool, q)) for pool in (self.cpu, self.host) if pool is not None and pool.size]
        return min(ends) if q < 0.5 else max(ends)


def host_speeds(timelines: list[list[float]]) -> np.ndarray | None:
    """Every calibration repeat of the sweeps' timelines against the median of its sweep (None: none
    recorded). A sweep's own median: two sweeps may have run on different hosts."""
    out = [np.asarray(ips, dtype=float) / np.median(ips) for ips in timelines if len(ips) >= 2]
    return np.concatenate(out) if out else None


def fit_draws(fit: WorkloadFit, n: int = DRAWS, seed: int = SEED, host: np.ndarray | None = None) -> FitDraws:
    """The draws of a fit (see the module); `host`: the host's speed over the sweep (`host_speeds`)."""
    rng = np.random.default_rng(seed)
    shapes = measured_shapes(fit)
    rates = np.empty((n, len(shapes)))
    pools = _factor_pools(fit)
    for j, shape in enumerate(shapes):
        rates[:, j] = _shape_draws(shape, n, rng, pools[_TERMS.get(shape.bottleneck, "all")])
    measured = {term: rng.choice(pools[term], n) for term in ("cpu", "io", "gpu")}
    bound = {name: param.bound for name, param in fit.params.items()}
    return FitDraws(shapes, rates, measured["cpu"] / np.median(pools["cpu"]), measured["io"] / np.median(pools["io"]),
                    measured, bound.get("per_vcpu") == "lower", bound.get("bytes_per_sample") == "upper",
                    bound.get("gpu_ceiling") == "lower", float(fit.value("knee_sharpness", 0.0) or 0.0), host,
                    "gpu_ceiling" in fit.params and fit.params["gpu_ceiling"].source == "measured")


# The term a measurement saw binding (`Point.bottleneck`), by its pool in `_factor_pools`.
_TERMS = {"cpu": "cpu", "gpu": "gpu", "disk": "io", "memory": "io"}


def _shape_draws(shape: MeasuredShape, n: int, rng: np.random.Generator, pool: np.ndarray) -> np.ndarray:
    """A shape's figure in every draw: its passes' median drawn again, or, measured once, moved by
    the factors of `pool` (relative to their median) and within half its own sub-window spread."""
    rates = np.array(shape.rates, dtype=float)
    if rates.size >= 2:
        return np.median(rates[rng.integers(0, rates.size, size=(n, rates.size))], axis=1)
    window = 1.0 + 0.5 * shape.spread * rng.uniform(-1.0, 1.0, n)
    return shape.median * window * rng.choice(pool, n) / np.median(pool)


def _factor_pools(fit: WorkloadFit) -> dict[str, np.ndarray]:
    """Each measurement's rate over the fit's prediction of its shape, by the term that binds there
    ("cpu", "io", "gpu"; fewer than _MIN_POOL: every measurement's), and every measurement's ("all")."""
    by_term: dict[str, list[float]] = {"cpu": [], "io": [], "gpu": []}
    for point, _ in fit.residuals:
        predicted = fit.predict_measured(point)
        if predicted.throughput <= 0:
            continue
        rates = point.pass_rates or None
        term = {"cpu": "cpu", "gpu": "gpu"}.get(predicted.bottleneck, "io")
        by_term[term] += [float(r) / predicted.throughput for r in (rates or [point.throughput])]
    every = [r for pool in by_term.values() for r in pool]
    out = {}
    for term, pool in [*by_term.items(), ("all", every)]:
        pool = pool if len(pool) >= _MIN_POOL else every
        out[term] = np.array(pool if len(pool) >= _MIN_POOL else [1.0], dtype=float)
    return out


# ---------------------------------------------------------------------------- ranges
def anchored_range(point: float, draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """(pessimistic, optimistic) ends of `point`'s range at `confidence` (see the module)."""
    middle, low, high = np.quantile(draws, [0.5, 1 - confidence, confidence])
    return point + float(low - middle), point + float(high - middle)


def model_draws(draws: FitDraws, predicted: Prediction) -> np.ndarray:
    """The model's rate at one shape in every draw (its terms as `predicted` gives them)."""
    if predicted.throughput <= 0:
        return np.zeros(draws.cpu.shape)
    gpu = np.full(draws.cpu.shape, predicted.terms["gpu"])
    io = predicted.terms.get("io", math.inf) * draws.io
    return combine_terms(gpu, predicted.terms["cpu"] * draws.cpu, io, draws.sharpness)


def open_high(draws: FitDraws, predicted: Prediction) -> float | None:
    """The rate without the terms that are only bounded, where one is: nothing caps the optimistic end below it."""
    if not (draws.cpu_open or draws.io_open) or predicted.throughput <= 0:
        return None
    cpu = math.inf if draws.cpu_open else predicted.terms["cpu"]
    io = math.inf if draws.io_open else predicted.terms.get("io", math.inf)
    return float(combine_terms(np.array([predicted.terms["gpu"]]), np.array([cpu]), np.array([io]),
                               draws.sharpness)[0])


def model_range(draws: FitDraws, predicted: Prediction, confidence: float, band: float = 0.0) -> tuple[float, float]:
    """The (low, high) rate a measurement at one shape would read, at `confidence` (see the module),
    widened by the model's own error `band` where the shape's vCPU count was not measured."""
    if predicted.throughput <= 0:
        return 0.0, 0.0
    low, high = _spread_range(draws, predicted, confidence)
    return widen(predicted.throughput, low, high, *band_moves(draws, predicted, band))


def band_moves(draws: FitDraws, predicted: Prediction, band: float,
               hold_ceiling: bool = False) -> tuple[float, float]:
    """How far (relative, down and up) the model's own error `band` moves a prediction: its CPU and
    disk terms, and a ceiling it fitted, moved by the band; a measured ceiling kept (`level_error`).
    `hold_ceiling`: the ceiling kept too, as a decision keeps it (a share of the ceiling: a shape bound
    by the GPU is at 100% of whatever the ceiling is)."""
    if band <= 0 or predicted.throughput <= 0:
        return 0.0, 0.0
    terms = predicted.terms
    keep = hold_ceiling or draws.ceiling_measured

    def rate(factor: float) -> float:
        gpu = terms["gpu"] * (1.0 if keep else factor)
        return float(combine_terms(np.array([gpu]), np.array([terms["cpu"] * factor]),
                                   np.array([terms.get("io", math.inf) * factor]), draws.sharpness)[0])

    return max(1 - rate(1 - band) / predicted.throughput, 0.0), max(rate(1 + band) / predicted.throughput - 1, 0.0)


def _spread_range(draws: FitDraws, predicted: Prediction, confidence: float) -> tuple[float, float]:
    terms, factor = predicted.terms, draws.measured
    rates = combine_terms(terms["gpu"] * factor["gpu"], terms["cpu"] * factor["cpu"],
                          terms.get("io", math.inf) * factor["io"], draws.sharpness)
    low, high = np.quantile(rates, sorted((confidence, 1 - confidence)))
    if draws.gpu_open or draws.cpu_open or draws.io_open:
        tops = {term: float(np.quantile(factor[term], max(confidence, 1 - confidence))) for term in factor}
        unbounded = combine_terms(np.array([math.inf if draws.gpu_open else terms["gpu"] * tops["gpu"]]),
                                  np.array([math.inf if draws.cpu_open else terms["cpu"] * tops["cpu"]]),
                                  np.array([math.inf if draws.io_open else terms.get("io", math.inf) * tops["io"]]),
                                  draws.sharpness)[0]
        high = max(high, unbounded) if math.isfinite(unbounded) else high
    return max(float(low), 0.0), float(high)


@dataclass(frozen=True)
class KneeRange:
    """The model's knee at the optimistic (`low`) and the pessimistic (`high`) end (None: not reached),
    the CPU factors of those ends before the model's own error, and that error (`level_error`) where
    the pessimistic knee was found (at the largest count searched where it was not)."""

    low: int | None
    high: int | None
    optimistic: float
    pessimistic: float
    model_error: float


def knee_range(fit: WorkloadFit, draws: FitDraws, tolerance: float, confidence: float, ram_gib: float,
               disk_mbps: float | None, max_vcpus: int, cpu_scale: float = 1.0) -> KneeRange:
    """The fewest vCPUs within `tolerance` of the ceiling (ample RAM, the given disk) with the CPU term
    moved to the optimistic and to the pessimistic end: the host's speeds (`FitDraws.factor`) and, at a
    count without a CPU-bound measurement, the model's held-out error for the CPU term there
    (`level_error.vcpu_band`), in quadrature; `cpu_scale`: the CPU term carried to another host's
    CPU (`sizer.fingerprint`). None where no count up to `max_vcpus` reaches it."""
    optimistic = math.inf if draws.cpu_open else draws.factor(confidence, pessimistic=False)
    pessimistic = draws.factor(confidence, pessimistic=True)
    low = high = None
    error = 0.0
    for v in range(1, max_vcpus + 1):
        predicted = fit.predict(v, ram_gib, disk_mbps, cpu_scale=cpu_scale)
        error = vcpu_band(fit, v, confidence, cpu=True)
        down, up = widen(1.0, pessimistic, optimistic, error, error)  # factors moved by the error, in quadrature
        if low is None and _meets_at(fit, draws, predicted, max(up, down), tolerance):
            low = v
        if high is None and _meets_at(fit, draws, predicted, min(up, down), tolerance):
            high = v
        if low is not None and high is not None:
            break
    return KneeRange(low, high, optimistic, pessimistic, error)


def _meets_at(fit: WorkloadFit, draws: FitDraws, predicted: Prediction, factor: float, tolerance: float) -> bool:
    if predicted.throughput <= 0:
        return False
    rate = combine_terms(np.array([predicted.terms["gpu"]]), np.array([predicted.terms["cpu"] * factor]),
                         np.array([predicted.terms.get("io", math.inf)]), draws.sharpness)[0]
    return meets_tolerance(float(rate), fit.ceiling, tolerance)
