"""The confidence level of every range an answer carries (`--confidence`): kept apart from the model
so that reading a command line does not load it."""

from __future__ import annotations

from sizer.errors import SizerError

# The level of every range unless asked otherwise: the pick must hold at the range's pessimistic end.
DEFAULT_CONFIDENCE = 0.9


def check_confidence(confidence: float, name: str = "confidence") -> None:
    """A confidence level is a fraction strictly between 0 and 1 (0.5: the figure itself, no margin)."""
    if not 0 < confidence < 1:
        raise SizerError(f"{name} must be a fraction between 0 and 1 (for example 0.9; 0.5 is the figure itself), "
                         f"got {confidence:g}")
