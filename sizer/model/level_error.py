"""The model's demonstrated error at vCPU counts nobody measured.

A prediction at a measured vCPU level rests on the measurements there; at any other count it is
the model's inter- or extrapolation, and how far that can miss is measured the same way: each
measured level in turn is held out (every real-input shape at it; synthetic-input points stay), the
rest fitted again with the fit's own options (`WorkloadFit.refit_without`), and the level's shapes
predicted. Each held-out shape's error is |predicted / measured - 1|.

A prediction at a count that is not a measured level carries a band at confidence `c`: from the
held-out errors of the nearest measured level on each side (beyond the outermost level, of that
level alone: its own hold-out was an extrapolation too), the k-th smallest of the n errors with
k = ceil((n + 1)(2c - 1)), the split-conformal rule for a two-sided interval holding a share 2c - 1
of such errors; k > n (too few errors for the level asked): the largest. At c = 0.5 the band is 0.
The band for the CPU term (`cpu=True`) uses only the shapes the measurement saw CPU-bound and the
levels that have one: where the knee lies, the CPU term is what is predicted.

The band moves the terms the model extrapolates: the CPU and the disk term, and the ceiling where
the model fitted it (a ceiling measured with input on the device stays): a shape whose CPU term lies
far enough above a measured ceiling stays at it (`uncertainty.band_moves`). A decision, a share of the
ceiling, keeps any ceiling (`decision.shape_figure`). The errors are computed once per fit, when a
band is first asked at a count that is not measured.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Sequence

from sizer.model.types import WorkloadFit
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT


@dataclass(frozen=True)
class LevelErrors:
    """Per measured vCPU level, the absolute error of each of its shapes when the level was held out
    (`errors`), and of those the measurement saw CPU-bound (`cpu_errors`); a level that could not be
    held out (too few points left to fit) has none."""

    errors: dict[int, tuple[float, ...]]
    cpu_errors: dict[int, tuple[float, ...]]

    def band(self, vcpus: float, confidence: float, cpu: bool = False) -> float:
        """The band at `vcpus` (see the module); 0 where no level gives an error."""
        by_level = self.cpu_errors if cpu else self.errors
        levels = sorted(level for level, errs in by_level.items() if errs)
        if not levels or any(abs(vcpus - level) < 1e-9 for level in levels):
            return 0.0
        below = [level for level in levels if level < vcpus]
        above = [level for level in levels if level > vcpus]
        nearest = ([below[-1]] if below else []) + ([above[0]] if above else [])
        return conformal_band([e for level in nearest for e in by_level[level]], confidence)


def conformal_band(errors: Sequence[float], confidence: float) -> float:
    """The k-th smallest of `errors` with k = ceil((n + 1)(2c - 1)) (the largest where k > n; 0 for
    none, or at c <= 0.5): a two-sided band that holds a share 2c - 1 of errors like these."""
    ordered = sorted(abs(e) for e in errors)
    k = math.ceil((len(ordered) + 1) * (2 * confidence - 1) - 1e-9)
    if not ordered or k < 1:
        return 0.0
    return ordered[min(k, len(ordered)) - 1]


def _real(fit: WorkloadFit) -> list[Point]:
    return [p for p, _ in fit.residuals if p.usable and p.input != SYNTHETIC_INPUT]


def measured_levels(fit: WorkloadFit, cpu: bool = False) -> list[int]:
    """The fit's measured vCPU levels (with a CPU-bound shape, for `cpu`)."""
    return sorted({p.vcpus for p in _real(fit) if not cpu or _cpu_bound(fit, p)})


def _cpu_bound(fit: WorkloadFit, point: Point) -> bool:
    """What the measurement saw binding; where it did not say, what the fit predicts there."""
    return (point.bottleneck or fit.predict_measured(point).bottleneck) == "cpu"


def _at_level(level: int, point: Point) -> bool:
    return point.vcpus == level


def held_out_level_errors(fit: WorkloadFit) -> LevelErrors:
    """Each measured level held out in turn (see the module); nothing for a fit that cannot refit itself."""
    errors: dict[int, tuple[float, ...]] = {}
    cpu_errors: dict[int, tuple[float, ...]] = {}
    real = _real(fit)
    if fit.refit_without is None:
        return LevelErrors(errors, cpu_errors)
    for level in sorted({p.vcpus for p in real}):
        if sum(p.vcpus != level for p in real) < 2:
            continue
        held_out = fit.refit_without(partial(_at_level, level))
        if held_out is None:
            continue
        shapes = [(p, abs(held_out.predict_measured(p).throughput / p.throughput - 1)) for p in real
                  if p.vcpus == level and p.throughput > 0]
        errors[level] = tuple(e for _, e in shapes)
        cpu_errors[level] = tuple(e for p, e in shapes if _cpu_bound(fit, p))
    return LevelErrors(errors, cpu_errors)


_COMPUTED: dict[int, LevelErrors] = {}


def level_errors(fit: WorkloadFit) -> LevelErrors:
    """`held_out_level_errors` of a fit, computed once while the fit lives."""
    key = id(fit)
    if key not in _COMPUTED:
        _COMPUTED[key] = held_out_level_errors(fit)
        weakref.finalize(fit, _COMPUTED.pop, key, None)
    return _COMPUTED[key]


def vcpu_band(fit: WorkloadFit, vcpus: float, confidence: float, cpu: bool = False) -> float:
    """The band of a prediction at `vcpus` (see the module): 0 at a measured level, without refitting."""
    if any(abs(vcpus - level) < 1e-9 for level in measured_levels(fit, cpu)):
        return 0.0
    return level_errors(fit).band(vcpus, confidence, cpu)


def widen(point: float, low: float, high: float, down: float, up: float) -> tuple[float, float]:
    """A range (`low` <= `point` <= `high`) widened by the model's own error, which moves `point` down
    and up by the relative `down` and `up`: each end's distance from `point` and that move add in
    quadrature (independent sources: the host's moment and the model's own error)."""
    if point <= 0 or (down <= 0 and up <= 0):
        return low, high
    below = math.hypot(max(point - low, 0.0) / point, down)
    above = math.hypot(max(high - point, 0.0) / point, up)
    return min(low, max(point * (1 - below), 0.0)), max(high, point * (1 + above))
