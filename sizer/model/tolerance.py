"""The one rule for "within tolerance of the ceiling", shared by the recommendation and the report."""

from __future__ import annotations

# A prediction this close below the target (relative) still meets it: rounding, not a shortfall.
_ROUNDING = 1e-9


def tolerance_target(ceiling: float, tolerance: float) -> float:
    """The least throughput within `tolerance` (a fraction, 0.05 for 5%) of `ceiling`."""
    return (1.0 - tolerance) * ceiling


def meets_tolerance(throughput: float, ceiling: float, tolerance: float) -> bool:
    """Whether `throughput` is within `tolerance` of `ceiling` (at least `tolerance_target`)."""
    return throughput >= tolerance_target(ceiling, tolerance) * (1 - _ROUNDING)
