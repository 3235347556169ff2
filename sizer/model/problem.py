"""The least-squares problem behind a fit: free parameters, their bounds, the solver, and what the
solution tells (intervals, leave-one-out predictions)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from sizer.model.equations import PARAM_NAMES, throughput_terms

Z95 = 1.959964
# 95% intervals by model key: (low, high), or (None, None) where the points do not identify it.
Intervals = dict[str, tuple[float | None, float | None]]

# Bounds of each free parameter (key: low, high, fitted on a log scale); the footprint's upper bound
# is the least RAM measured (`ParamSpec.for_key`).
_BOUNDS = {
    "G": (1e-9, 1e12, True),
    "c": (1e-9, 1e12, True),
    "s": (0.0, 1.0, False),
    "k": (0.0, 0.5, False),
    "b": (1e-9, 1e9, True),
    "D": (1e-3, 1e7, True),
    "p": (1.0, 64.0, False),
}


@dataclass
class ParamSpec:
    """One free parameter: model key, bounds, log-transformed or not."""

    key: str
    low: float
    high: float
    log: bool

    @classmethod
    def for_key(cls, key: str, m: np.ndarray | None = None) -> ParamSpec:
        if key == "F":
            assert m is not None, "the footprint's bound is the least RAM measured"
            return cls("F", 0.0, max(float(m.min()), 1e-6), False)
        return cls(key, *_BOUNDS[key])


def specs_for(free: set[str], m: np.ndarray) -> list[ParamSpec]:
    """The specs of the free keys, in the order of `PARAM_NAMES`."""
    return [ParamSpec.for_key(key, m) for key in PARAM_NAMES if key in free]


@dataclass
class FitProblem:
    """Least squares on relative error over the real-input points; `specs` are the free parameters,
    `fixed` the values of the others, `fixed_notes` why a parameter is held fixed, `one_sided` which
    fixed ones are only a bound ("lower" or "upper"). `ceiling_floor`: a free ceiling never goes
    below the best of the points fitted (the measurements outrank the fitted plateau)."""

    v: np.ndarray
    m: np.ndarray
    bw: np.ndarray
    y: np.ndarray
    fixed: dict[str, float]
    specs: list[ParamSpec]
    fixed_notes: dict[str, str] = field(default_factory=dict)
    one_sided: dict[str, str] = field(default_factory=dict)
    ceiling_floor: bool = False

    def to_theta(self, values: dict[str, float]) -> np.ndarray:
        out = []
        for sp in self.specs:
            x = min(max(values[sp.key], sp.low), sp.high)
            out.append(math.log(x) if sp.log else x)
        return np.array(out, dtype=float)

    def bounds(self, idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the free parameters when fitting the points `idx` (all by default)."""
        floor = self.best(idx) if self.ceiling_floor else 0.0
        lo = [math.log(max(sp.low, floor) if sp.key == "G" else sp.low) if sp.log else sp.low for sp in self.specs]
        hi = [math.log(sp.high) if sp.log else sp.high for sp in self.specs]
        return np.array(lo), np.array(hi)

    def best(self, idx: np.ndarray | None = None) -> float:
        """The highest rate among the points `idx` (all by default): the least the ceiling can be."""
        y = self.y if idx is None else self.y[idx]
        return float(np.max(y)) if y.size else 0.0

    def values(self, theta: np.ndarray) -> dict[str, float]:
        out = dict(self.fixed)
        for sp, x in zip(self.specs, theta):
            out[sp.key] = math.exp(x) if sp.log else float(x)
        return out

    def residuals(self, theta: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        vals = self.values(theta)
        sel: Any = slice(None) if idx is None else idx
        x, _ = throughput_terms(vals, self.v[sel], self.m[sel], self.bw[sel])
        return (x - self.y[sel]) / self.y[sel]

    def cost(self, values: dict[str, float]) -> float:
        """The sum of squared relative errors at `values`."""
        return float(np.sum(self.residuals(self.to_theta(values)) ** 2))

    def solve(self, starts: list[dict[str, float]], idx: np.ndarray | None = None) -> tuple[Any, float]:
        """The best least-squares result from `starts` over the points `idx` (all by default) and its
        sum of squared errors; (None, inf) when every run failed, (None, cost) without free parameters."""
        if not self.specs:
            return None, float(np.sum(self.residuals(np.array([]), idx) ** 2))
        best = None
        # Short runs from every start (the kinks of min() can make a run zigzag), then polish the best.
        for start in starts:
            res = self._run(self.to_theta(start), 60 if len(starts) > 1 else 300, idx)
            if res is not None and (best is None or res.cost < best.cost):
                best = res
        if best is not None and best.status == 0 and len(starts) > 1:
            polished = self._run(best.x, 300, idx)
            if polished is not None and polished.cost <= best.cost:
                best = polished
        if best is None:
            return None, math.inf
        return best, float(2 * best.cost)

    def _run(self, theta0: np.ndarray, budget: int, idx: np.ndarray | None) -> Any:
        lo, hi = self.bounds(idx)
        theta0 = np.clip(theta0, lo + 1e-12, hi - 1e-12)
        try:
            return least_squares(self.residuals, theta0, bounds=(lo, hi), args=(idx,),
                                 x_scale="jac", max_nfev=budget)
        except (ValueError, FloatingPointError):
            return None


def starts(values: dict[str, float], problem: FitProblem) -> list[dict[str, float]]:
    """Starting points for a wide search: `values`, then variations of the free parameters that a
    single start can miss."""
    keys = {sp.key for sp in problem.specs}
    out = [dict(values)]
    if "s" in keys or "k" in keys:
        for s0, k0 in ((0.0, 0.0), (0.1, 0.0), (0.02, 0.005), (0.3, 0.01)):
            out.append(dict(values, s=s0, k=k0))
    if "G" in keys:
        out.append(dict(values, G=values["G"] * 1.3))
    if "D" in keys and values.get("D"):
        out += [dict(values, D=values["D"] * f) for f in (0.6, 2.0, 5.0)]
    if "b" in keys and values.get("b"):
        out += [dict(values, b=values["b"] * f) for f in (0.7, 1.5)]
    return out


def with_sharpness(problem: FitProblem) -> FitProblem:
    """The same problem with the smooth minimum's sharpness `p` free."""
    fixed = {k: v for k, v in problem.fixed.items() if k != "p"}
    return FitProblem(problem.v, problem.m, problem.bw, problem.y, fixed,
                      list(problem.specs) + [ParamSpec.for_key("p")], problem.fixed_notes, problem.one_sided,
                      problem.ceiling_floor)


def leave_one_out(problem: FitProblem, values: dict[str, float]) -> list[float]:
    """Each point's prediction by the problem refitted without it (from `values`)."""
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
        x, _ = throughput_terms(vals, problem.v[i:i + 1], problem.m[i:i + 1], problem.bw[i:i + 1])
        preds.append(float(x[0]))
    return preds


def ape_stats(preds: list[float], y: np.ndarray) -> tuple[float, float]:
    """Median and largest absolute relative error of `preds` against `y`."""
    ape = np.abs(np.array(preds) - y) / y
    return float(np.median(ape)), float(np.max(ape))


def intervals(res: Any, specs: list[ParamSpec]) -> Intervals:
    """95% intervals from the Jacobian at the optimum (Gauss-Newton covariance)."""
    if res is None or not specs:
        return {}
    jac = np.asarray(res.jac, dtype=float)
    dof = res.fun.size - len(specs)
    if dof <= 0:
        return {sp.key: (None, None) for sp in specs}
    sigma2 = float(np.sum(res.fun ** 2)) / dof
    try:
        cov = np.linalg.inv(jac.T @ jac) * sigma2
    except np.linalg.LinAlgError:
        return {sp.key: (None, None) for sp in specs}
    return {sp.key: _interval(sp, float(res.x[i]), cov[i, i], jac[:, i]) for i, sp in enumerate(specs)}


def _interval(sp: ParamSpec, x: float, var: float, jac_column: np.ndarray) -> tuple[float | None, float | None]:
    """One parameter's 95% interval from its variance; none where the points do not inform it."""
    if not np.isfinite(var) or var < 0 or not np.any(jac_column):
        return None, None
    sd = math.sqrt(var)
    if not sp.log:
        return float(max(sp.low, x - Z95 * sd)), float(min(sp.high, x + Z95 * sd))
    if Z95 * sd > 20:  # wider than e^20: no information
        return None, None
    return float(math.exp(x - Z95 * sd)), float(math.exp(x + Z95 * sd))
