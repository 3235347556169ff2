"""Plain values for the report: finite numbers, significant-digit rounding, JSON-able data."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any


def finite_number(value: Any) -> float | None:
    """A finite float, or None for a missing, boolean, non-numeric, NaN or infinite value."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(value: float | None, digits: int = 4) -> float | None:
    """`value` rounded to `digits` significant digits (None stays None)."""
    if value is None:
        return None
    return float(f"{value:.{digits}g}")


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples, paths and numpy scalars as plain JSON data; NaN and inf as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
