"""Parsing and formatting of sizes and lists given on the command line."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sizer.errors import SizerError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_FACTOR = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
GIB = 1024**3


def parse_size(text: str, default_unit: str = "g") -> int:
    """'4G', '512M', '1.5GiB', '8' (GiB by default) -> bytes. Binary units, as RAM is sold."""
    m = _SIZE.match(str(text))
    if not m:
        raise SizerError(f"not a size: {text!r} (examples: 4G, 512M, 1.5GiB)")
    number, unit = float(m.group(1)), (m.group(2) or default_unit).lower()
    value = int(number * _FACTOR[unit])
    if value <= 0:
        raise SizerError(f"size must be positive: {text!r}")
    return value


def parse_gib(text: str) -> float:
    return parse_size(text) / GIB


# The least RAM a shape may have: a worker's interpreter and its libraries alone take tens of MiB.
MIN_SHAPE_RAM = 64 * 1024**2


def parse_shape_ram(text: str, what: str = "--ram") -> int:
    """A shape's RAM ('4G', '512M', GiB by default) -> bytes, at least MIN_SHAPE_RAM."""
    value = parse_size(text)
    if value < MIN_SHAPE_RAM:
        raise SizerError(f"{what}: {str(text).strip()} is {format_bytes(value)}, below the minimum of "
                         f"{format_bytes(MIN_SHAPE_RAM)} for a shape")
    return value


def parse_int_list(text: str, what: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; every item a positive integer."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise SizerError(f"{what}: empty list")
    out = []
    for item in items:
        if not item.isdigit() or int(item) <= 0:
            raise SizerError(f"{what}: {item!r} is not a positive integer")
        out.append(int(item))
    return out


def parse_str_list(text: str) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()]


def format_bytes(n: float) -> str:
    for unit, factor in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n:.0f} B"


def parse_setting(item: str, what: str) -> tuple[str, Any]:
    """'key=value' -> (key, value); the value is read as JSON where it parses (8, 0.5, true), else
    text. A number that is not finite (NaN, Infinity, 1e999) is refused."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SizerError(f"{what} wants key=value, got {item!r}")

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise SizerError(f"{what}: {key}={value.strip()} is not a finite number")
        return number

    try:
        return key, json.loads(value, parse_float=finite, parse_constant=finite)
    except ValueError:
        return key, value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$", re.IGNORECASE)


def parse_duration(text: str, what: str) -> float:
    """'90', '90s', '9m', '1.5h' -> seconds (a bare number is seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise SizerError(f"{what}: cannot read {text!r} as a duration (e.g. 540, 540s, 9m, 1h)")
    seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[(match.group(2) or "s").lower()]
    if not (math.isfinite(seconds) and seconds > 0):
        raise SizerError(f"{what}: a duration must be positive, got {text!r}")
    return seconds


def unit_noun(unit: str) -> str:
    """What a throughput unit counts: "images/s" -> "images", "tokens/s" -> "tokens" (a cost is per
    million of them)."""
    noun = unit.split("/")[0].strip()
    return noun or "samples"
