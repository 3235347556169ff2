"""Pure statistics of step samples: steady-state windows, their rates and spread.

Standard library only: used by workers in any interpreter and by sizer itself.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# A point whose sub-window rates spread by more than this is flagged `noisy`. It sits above the
# spread that points reach on an idle host (docs/PERFORMANCE.md, "The noisy threshold"), so the
# flag says the host was busy, not that the meter is strict. When to stop measuring is a tighter
# target of its own (Spec.spread_target): a point measures on while its budget allows.
NOISY_SPREAD = 0.20


# A window whose vCPUs the hypervisor kept from running this share of its time or more ran on a
# busy host (counters `steal_share`): the figure is the host's moment as much as the shape's.
BUSY_HOST_STEAL = 0.05


def is_noisy(spread: float) -> bool:
    """The `noisy` rule: sub-window rates more than NOISY_SPREAD apart. Nothing else: a point whose
    windows agree is never noisy, whatever else marks it (`marks`)."""
    return spread > NOISY_SPREAD


def marks(window_short: str = "", steal_share: float | None = None) -> list[str]:
    """What else marks a point's figure, each in words, beside its status: a window shorter than the
    meter wanted (`window_short`, e.g. "34 of 80 steps measured": fewer loader rounds, as a
    disk-throttled point's batches come slowly, yet their rate may agree to the percent), and a
    busy host (the hypervisor took BUSY_HOST_STEAL or more of its vCPUs' time)."""
    out = []
    if window_short:
        out.append(f"short window ({window_short})")
    if steal_share is not None and steal_share >= BUSY_HOST_STEAL:
        out.append(f"busy host (the hypervisor took {steal_share:.0%} of its vCPUs' time)")
    return out


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / median; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else math.inf


# The consumer's own pace is the median step of its warm-up (after the first, which holds the
# start); a round of the loader's steps this much slower than that pace waited for its input, and a
# step this many times the pace is where the waiting began.
ROUND_SLOWER = 1.2
WAITED = 1.5


def window_start(intervals: Sequence[float], warmup_steps: int, drain_s: float | None,
                 round_steps: int = 1) -> int | None:
    """Index of the first measured step, given the step intervals so far; None while undecided.

    For steps whose window opened right after `warmup_steps` steps, with no drain of the loader
    (`workloads.loop.drain_ready`): where the window opens once the consumer has caught up with the
    batches its loader read before. The workers fill their prefetch queue while the model is built,
    and a consumer faster than they are spends its first seconds on that backlog at its own pace (on
    an H200 host, 42 steps of 16-vCPU training at the GPU's 4,700 images/s, then 3,335, with a
    window that read 3,998 over both). `drain_s` unset: right after the warm-up. Caught up: a round of
    `round_steps` steps (the loader's workers, who hand over a batch each per round) took
    ROUND_SLOWER times as long as at the consumer's own pace. The window then opens with that
    round's first step longer than WAITED x the pace (steady state began as the backlog's last batch
    left), right after the warm-up where its last round was slow already, and after `drain_s`
    seconds of steps past the warm-up where no round is: a job bound by its own speed never waits,
    and its rate is its own with or without a backlog. Timing jitter at the consumer's pace (a late
    completion, then an early one) evens out over a round; a single step would read it as a wait.
    """
    n = len(intervals)
    if n < warmup_steps:
        return None
    base = intervals[1:warmup_steps] if warmup_steps > 1 else intervals[:1]
    if not drain_s or not base:
        return warmup_steps
    size = max(1, int(round_steps))
    pace = median(base)

    def slow_round(last: int) -> bool:
        first = max(1, last - size + 1)
        return sum(intervals[first:last + 1]) > ROUND_SLOWER * pace * (last + 1 - first)

    if slow_round(warmup_steps - 1):
        return warmup_steps
    spent = 0.0
    for k in range(warmup_steps, n):
        spent += intervals[k]
        if slow_round(k):
            first = max(warmup_steps, k - size + 1)
            return next((j for j in range(first, k + 1) if intervals[j] > WAITED * pace), first)
        if spent >= drain_s:
            return k + 1
    return None


def drained_warmup(intervals: Sequence[float], warmup_steps: int, drain_s: float | None,
                   round_steps: int = 1) -> int:
    """How many leading steps `window_start` keeps out of the window (all of them where it never opens)."""
    start = window_start(intervals, warmup_steps, drain_s, round_steps)
    return len(intervals) if start is None else start


def _rounds(steps: Sequence[Sequence[float]], round_steps: int) -> list[tuple[float, float]]:
    """(seconds, samples) of each whole round of `round_steps` measured (non-warm-up) steps.

    `steps` rows are [seconds, samples, warmup]. A loader with W workers hands over batches in
    bursts of about W, so figures are taken over whole rounds. An incomplete last round is left out
    (on an H200 host, 2 steps of a burst, alone in the last window, read 146,202 images/s beside
    windows of about 400); fewer steps than a round are one round.
    """
    measured = [(float(s[0]), float(s[1])) for s in steps if not (len(s) > 2 and s[2])]
    size = max(1, int(round_steps))
    if len(measured) >= size:
        measured = measured[: len(measured) // size * size]
    else:
        size = max(1, len(measured))
    return [
        (sum(dt for dt, _ in measured[i : i + size]), sum(n for _, n in measured[i : i + size]))
        for i in range(0, len(measured), size)
    ]


def window_rate(steps: Sequence[Sequence[float]], round_steps: int = 1) -> float:
    """The measured window's rate: its samples over its seconds, over whole rounds (0 if empty)."""
    rounds = _rounds(steps, round_steps)
    seconds = sum(dt for dt, _ in rounds)
    return sum(n for _, n in rounds) / seconds if seconds > 0 else 0.0


def window_rates(steps: Sequence[Sequence[float]], n_windows: int, round_steps: int = 1) -> list[float]:
    """Split the measured (non-warm-up) steps into at most `n_windows` consecutive windows of about
    equal sample counts and return each window's rate (samples / seconds). Windows never split a
    step, nor a round of `round_steps` steps (see `_rounds`), and hold two rounds or more where the
    window has two: a window of one round is one burst of batches, and its rate says where the burst
    fell (on an H200 host at 2 vCPUs, 9 rounds in five windows left the last one a round of two
    ready batches, 7,523 images/s beside four of 605-684, a spread of 1,073%). The cuts fall where
    the samples so far reach each window's share of the total, so no runt is left at the end.
    """
    if n_windows < 1:
        raise ValueError("n_windows must be >= 1")
    rounds = _rounds(steps, round_steps)
    if not rounds:
        return []
    n_windows = max(1, min(n_windows, len(rounds) // 2))
    total = sum(n for _, n in rounds)
    rates: list[float] = []
    secs, samples, so_far = 0.0, 0.0, 0.0
    for dt, n in rounds:
        secs += dt
        samples += n
        so_far += n
        if so_far >= total * (len(rates) + 1) / n_windows * (1 - 1e-9) and len(rates) < n_windows - 1:
            rates.append(samples / secs if secs > 0 else 0.0)
            secs, samples = 0.0, 0.0
    if samples > 0:
        rates.append(samples / secs if secs > 0 else 0.0)
    return rates


def summarize(steps: Sequence[Sequence[float]], n_windows: int = 5, round_steps: int = 1) -> tuple[float, float, list[float]]:
    """(the whole window's rate, relative spread of its sub-windows, their rates) of the measured steps.

    The figure is the whole window's rate, not the median of its sub-windows: a loader-bound point
    holds only a few rounds of batches, so each sub-window's rate hangs on where a burst fell, and
    the median of five such rates stands up to 11% away from the samples over the seconds. Over 292
    points of a sweep on an H200 host, the whole window's rate made repeated shapes agree better and
    the model's held-out error smaller (docs/PERFORMANCE.md, "The figure of a point"). The
    sub-windows' spread still flags a point whose rate moved within its window.
    """
    rates = window_rates(steps, n_windows, round_steps)
    if not rates:
        return 0.0, 0.0, []
    return window_rate(steps, round_steps), relative_spread(rates), rates
