"""The one rule for "within tolerance of the ceiling", shared by the recommendation and the report."""

from __future__ import annotations

__all__ = ["MIN_HELD_OUT", "TRUST_FACTOR", "enough_held_out", "meets_tolerance", "model_trusted", "tolerance_target"]

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
# Held-out shapes a model is tested on before it is trusted: on shared GPU hosts the largest held-out
# error of a third of a 30-shape grid crossed the trust limit about as often as the whole grid's, and
# five or six shapes held out passed models that thirty held out failed.
MIN_HELD_OUT = 12


def enough_held_out(held_out: int) -> bool:
    """Whether a model was tested on enough held-out shapes to be trusted (MIN_HELD_OUT)."""
    return held_out >= MIN_HELD_OUT


def model_trusted(held_out_max: float | None, tolerance: float, held_out: int) -> bool:
    """Whether a model predicts unmeasured shapes well enough to size from: tested on enough
    held-out shapes (`held_out`, `enough_held_out`), and its largest held-out error is at most
    `TRUST_FACTOR` tolerances (unknown: not trusted)."""
    return held_out_max is not None and enough_held_out(held_out) and held_out_max <= TRUST_FACTOR * tolerance


def trust_words(held_out_max: float | None, tolerance: float, held_out: int) -> str:
    """Why a model is not trusted, in words (see `model_trusted`)."""
    if held_out_max is None:
        return f"no shape could be held out to test it (trust needs {MIN_HELD_OUT})"
    if not enough_held_out(held_out):
        return (f"it was tested on {held_out} held-out shapes, fewer than the {MIN_HELD_OUT} that trust needs "
                f"(it misses them by up to {held_out_max:.0%})")
    return (f"it misses held-out shapes by up to {held_out_max:.0%}, more than {TRUST_FACTOR:g} times the "
            f"{tolerance:.0%} tolerance")
