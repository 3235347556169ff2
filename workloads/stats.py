"""Pure statistics of step samples: steady-state windows, their rates and spread.

Standard library only: used by workers in any interpreter and by sizer itself.
"""

from __future__ import annotations

import math
from typing import Sequence


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / median; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else math.inf


def window_rates(steps: Sequence[Sequence[float]], n_windows: int, round_steps: int = 1) -> list[float]:
    """Split the measured (non-warm-up) steps into `n_windows` consecutive windows of about equal
    sample counts and return each window's rate (samples / seconds).

    `steps` rows are [seconds, samples, warmup]. Windows never split a step, nor a round of
    `round_steps` steps: a loader with W workers hands over batches in bursts of about W, so a window
    must hold whole rounds. An incomplete last round is left out (seen on an H200: 2 steps of a
    burst, alone in the last window, read 146,202 images/s beside windows of about 400).
    """
    measured = [(float(s[0]), float(s[1])) for s in steps if not (len(s) > 2 and s[2])]
    if n_windows < 1:
        raise ValueError("n_windows must be >= 1")
    size = max(1, int(round_steps))
    if len(measured) >= size:
        measured = measured[: len(measured) // size * size]
    else:
        size = max(1, len(measured))
    rounds = [
        (sum(dt for dt, _ in measured[i : i + size]), sum(n for _, n in measured[i : i + size]))
        for i in range(0, len(measured), size)
    ]
    if len(rounds) < n_windows:
        n_windows = max(1, len(rounds))
    if not rounds:
        return []
    total = sum(n for _, n in rounds)
    target = total / n_windows
    rates, secs, samples = [], 0.0, 0.0
    for dt, n in rounds:
        secs += dt
        samples += n
        if samples >= target * (1 - 1e-9) and len(rates) < n_windows - 1:
            rates.append(samples / secs if secs > 0 else 0.0)
            secs, samples = 0.0, 0.0
    if samples > 0:
        rates.append(samples / secs if secs > 0 else 0.0)
    return rates


def summarize(steps: Sequence[Sequence[float]], n_windows: int = 5, round_steps: int = 1) -> tuple[float, float, list[float]]:
    """(median window rate, relative spread, window rates) of the measured steps."""
    rates = window_rates(steps, n_windows, round_steps)
    if not rates:
        return 0.0, 0.0, []
    return median(rates), relative_spread(rates), rates
