"""Fitting only what the points can identify: fit, fix what the binding pattern cannot tell, refit."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sizer.model.equations import PARAM_NAMES, binding_terms, miss_fraction, throughput_terms
from sizer.model.problem import FitProblem, specs_for, starts

_MAX_ROUNDS = 6
# Fixed first where there are more free parameters than observations.
_DROP_ORDER = ("k", "s", "F", "D", "b", "G", "c")
_NO_RAM_EFFECT = "dataset size not measured and no shape was disk-bound: the RAM (page-cache) effect is not modelled"


@dataclass
class _Identification:
    """The fit in progress: the points, the current values, which keys are free, why others are fixed."""

    v: np.ndarray
    m: np.ndarray
    bw: np.ndarray
    y: np.ndarray
    values: dict[str, float]
    free: set[str]
    fixed_notes: dict[str, str]
    ceiling_floor: bool = False
    one_sided: dict[str, str] = field(default_factory=dict)

    def problem(self) -> FitProblem:
        """The problem over the free keys, never with more free parameters than observations."""
        for key in _DROP_ORDER:
            if len(self.free) <= len(self.y):
                break
            if key in self.free:
                self.free.discard(key)
                self.fixed_notes.setdefault(key, "fewer points than parameters: held fixed")
        fixed = {k: self.values[k] for k in self.values if k not in self.free}
        return FitProblem(self.v, self.m, self.bw, self.y, fixed, specs_for(self.free, self.m), self.fixed_notes,
                          self.one_sided, self.ceiling_floor)

    def fix(self, key: str, note: str, value: float | None = None, bound: str = "") -> None:
        """Hold `key` fixed (at `value` where given); `bound` "lower" or "upper" where the value is only that."""
        self.free.discard(key)
        if value is not None:
            self.values[key] = value
        self.fixed_notes[key] = note
        if bound:
            self.one_sided[key] = bound


def fit_identifiable(v: np.ndarray, m: np.ndarray, bw: np.ndarray, y: np.ndarray, values0: dict[str, float],
                     free: set[str], notes: list[str], pre_notes: dict[str, str] | None = None,
                     ceiling_floor: bool = False) -> tuple[dict[str, float], set[str], FitProblem]:
    """Fit, then fix what the binding pattern cannot identify and fit again (a few rounds at most).

    Parameters without any binding point (the GPU ceiling never reached, no CPU-bound shape) are
    settled first; what the remaining pattern can identify (USL terms, RAM effect) is judged on the
    refit, so one bad first fit does not throw a parameter away. `free` is narrowed in place; why
    each parameter is held fixed goes to `notes` and to the returned problem's `fixed_notes`.
    `ceiling_floor`: the ceiling is never below the highest measured rate (`FitProblem.ceiling_floor`).
    """
    state = _Identification(v, m, bw, y, dict(values0), free, dict(pre_notes or {}), ceiling_floor)
    problem = state.problem()
    for round_ in range(_MAX_ROUNDS):
        # A wide search first; later rounds start from where the previous one ended.
        res, _ = problem.solve(starts(state.values, problem) if round_ == 0 else [state.values])
        if res is not None:
            state.values = problem.values(res.x)
        binding = binding_terms(state.values, v, m, bw)
        if not _fix_unreached_terms(state, binding) and not _fix_unidentified_terms(state, binding):
            break
        problem = state.problem()
    else:
        res, _ = problem.solve([state.values])
        if res is not None:
            state.values = problem.values(res.x)
    notes.extend(f"{PARAM_NAMES[k]}: {msg}" for k, msg in state.fixed_notes.items())
    return state.values, state.free, problem


def _fix_unreached_terms(state: _Identification, binding: np.ndarray) -> bool:
    """Fix the GPU ceiling where no shape reached it and the CPU terms where no shape was CPU-bound."""
    changed = False
    values, v = state.values, state.v
    if "G" in state.free and not (binding == "gpu").any():
        _, terms = throughput_terms(values, v, state.m, state.bw)
        # The best the fitted terms reach over the measured shapes, not the highest point: the
        # highest of many noisy points overstates the level they share (among 30 flat points of
        # 90,000 to 129,000 tokens/s, the highest is an outlier).
        reached = float(np.max(np.minimum(terms["cpu"], terms["io"])))
        best = float(np.max(state.y))
        if state.ceiling_floor and best > reached:
            state.fix("G", "no measured shape is bound by the ceiling in the fit: it is held at the best "
                           "measurement, a lower bound", best, bound="lower")
        else:
            state.fix("G", "the GPU ceiling was not reached in any measured shape: the value is a lower bound",
                      reached, bound="lower")
        changed = True
    if "c" in state.free and not (binding == "cpu").any():
        state.free -= {"s", "k"}
        values["s"] = values["k"] = 0.0
        state.fix("c", "no shape was CPU-bound: per-vCPU rate is a lower bound (the highest seen per vCPU)",
                  float(np.max(state.y / v)), bound="lower")
        changed = True
    return changed


def _fix_unidentified_terms(state: _Identification, binding: np.ndarray) -> bool:
    """Fix the USL and disk terms that the shapes bound by them cannot identify."""
    cpu_levels = len(set(state.v[binding == "cpu"].tolist()))
    usl = _fix_usl_terms(state, cpu_levels)
    disk = _fix_disk_terms(state, binding == "io")
    return usl or disk


def _fix_usl_terms(state: _Identification, cpu_levels: int) -> bool:
    """Contention needs CPU-bound shapes at three vCPU levels, the serial fraction at two."""
    changed = False
    if cpu_levels < 3 and "k" in state.free:
        state.fix("k", f"CPU-bound at {cpu_levels} vCPU level(s): contention (kappa) not identifiable, set to 0", 0.0)
        changed = True
    if cpu_levels < 2 and "s" in state.free:
        state.fix("s", f"CPU-bound at {cpu_levels} vCPU level(s): serial fraction (sigma) not identifiable, set to 0",
                  0.0)
        changed = True
    return changed


def _fix_disk_terms(state: _Identification, io_bound: np.ndarray) -> bool:
    """Bytes per sample need a disk-bound shape; the dataset size and footprint need disk-bound
    shapes at two RAM levels."""
    changed = False
    io_ram_levels = len(set(state.m[io_bound].tolist()))
    if "b" in state.free and not io_bound.any():
        if "D" in state.free:  # no disk-bound shape: the dataset size cannot be told either
            state.fix("D", _NO_RAM_EFFECT, 0.0)
        state.fix("b", "no shape was disk-bound: bytes per sample is an upper bound (the most the slowest "
                       "measured disk could have fed)", _bytes_upper_bound(state), bound="upper")
        changed = True
    if "D" in state.free and io_ram_levels < 2:
        if io_ram_levels == 0 or "b" not in state.free:
            state.fix("D", _NO_RAM_EFFECT, 0.0)
        else:
            state.fix("D", "disk-bound at one RAM level only: the dataset size is only bounded by the points; "
                           "held at the fitted value")
        changed = True
    if "F" in state.free and io_ram_levels < 2:
        state.fix("F", "disk-bound at fewer than two RAM levels: the footprint is only bounded by the points; "
                       "held at the fitted value")
        changed = True
    return changed


def _bytes_upper_bound(state: _Identification) -> float:
    """The most bytes per sample the slowest measured disk could have fed at the measured rates."""
    throttled = np.isfinite(state.bw)
    miss = miss_fraction(state.values, state.m)
    with np.errstate(divide="ignore"):
        bounds = state.bw[throttled] / (state.y[throttled] * np.maximum(miss[throttled], 1e-9))
    return float(np.min(bounds)) if bounds.size else 0.0
