"""The one rule for "within tolerance of the ceiling", shared by the recommendation and the report."""

from __future__ import annotations

from sizer.confidence import DEFAULT_CONFIDENCE, check_confidence

__all__ = ["DEFAULT_CONFIDENCE", "TRUST_FACTOR", "check_confidence", "meets_tolerance", "model_trusted",
           "tolerance_target"]

# A prediction this close below the target (relative) still meets it: rounding, not a shortfall.
_ROUNDING = 1e-9


def tolerance_target(ceiling: float, tolerance: float) -> float:
    """The least throughput within `tolerance` (a fraction, 0.05 for 5%) of `ceiling`."""
    return (1.0 - tolerance) * ceiling


def meets_tolerance(throughput: float, ceiling: float, tolerance: float) -> bool:
    """Whether `throughput` is within `tolerance` of `ceiling` (at least `tolerance_target`)."""
    return throughput >= tolerance_target(ceiling, tolerance) * (1 - _ROUNDING)


# A model whose held-out error exceeds this many tolerances is not trusted to predict a shape.
TRUST_FACTOR = 2.0


def model_trusted(held_out_max: float | None, tolerance: float) -> bool:
    """Whether a model predicts unmeasured shapes well enough to size from: its largest held-out
    error is at most `TRUST_FACTOR` tolerances (unknown, with too few points to hold one out: trusted)."""
    return held_out_max is None or held_out_max <= TRUST_FACTOR * tolerance
