"""The two levels every answer is judged at, given once here and checked once where they enter:
the tolerance (the largest accepted slowdown against the ceiling) and the confidence of every
range an answer carries (`--confidence`). Kept apart from the model so that reading a command line
does not load it."""

from __future__ import annotations

from sizer.errors import SizerError

# The largest slowdown against the ceiling an instance may cause and still be recommended.
DEFAULT_TOLERANCE = 0.05
# The level of every range unless asked otherwise: the pick must hold at the range's pessimistic end.
DEFAULT_CONFIDENCE = 0.9


def check_tolerance(tolerance: float, name: str = "tolerance") -> None:
    """A tolerance is a fraction strictly between 0 and 1 (0.05: within 5% of the ceiling)."""
    if not 0 < tolerance < 1:
        raise SizerError(f"{name} must be a fraction between 0 and 1 (for example {DEFAULT_TOLERANCE:g}), "
                         f"got {tolerance:g}")


def check_confidence(confidence: float, name: str = "confidence") -> None:
    """A confidence level is a fraction strictly between 0 and 1 (0.5: the figure itself, no margin)."""
    if not 0 < confidence < 1:
        raise SizerError(f"{name} must be a fraction between 0 and 1 (for example {DEFAULT_CONFIDENCE:g}; 0.5 is the "
                         f"figure itself), got {confidence:g}")
