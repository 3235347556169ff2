"""Stored figures and the method that made them (workloads.protocol.METHOD_VERSION).

A stored point's figure follows the rule of the sizer that measured it. `stored_method` tells which
rule that was from what the point holds; `bring_to_current` re-derives the figure from the point's
raw steps, one method at a time, as far as those steps allow; `method_notes` names the points that
stay behind, for the report.

Each re-derivation that changes a figure keeps the one before under `extra["rederived"]` (a list,
oldest first), so nothing measured is lost.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter, defaultdict
from typing import Callable, Iterable, Sequence

from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT
from workloads import stats
from workloads.loop import DRAIN_MAX_S
from workloads.protocol import ERROR, METHOD_VERSION, NOISY, OK, Result

USABLE = (OK, NOISY)
# The fewest measured steps a window holds, and the sub-windows its spread is judged over
# (workloads.measure.Meter's defaults `min_steps` and `n_windows`).
MIN_WINDOW_STEPS = 10
SUB_WINDOWS = 5
# A stored figure equals one derived from its steps within this share (JSON keeps 17 digits).
_SAME = 1e-9
_NOTE_SHAPES = 6  # shapes a note names before "N more shapes"


@dataclasses.dataclass(frozen=True)
class SweepSettings:
    """What a re-derivation needs of the sweep a point belongs to."""
    time_budget_s: float | None = None


# ---------------------------------------------------------------- what a stored point holds
def loader_workers(result: Result) -> int:
    """How many loader workers fed the point (0: its input was on the device, or no loader)."""
    workers = (result.extra or {}).get("loader_workers")
    if not isinstance(workers, int) or (result.config or {}).get("input") == SYNTHETIC_INPUT:
        return 0
    return workers


def round_steps(result: Result) -> int:
    """Steps in one loader round: W workers hand over about W batches at once; else single steps."""
    workers = loader_workers(result)
    return workers if workers >= 2 else 1


def _measured(steps: Sequence[Sequence[float]]) -> list[Sequence[float]]:
    return [row for row in steps if not (len(row) > 2 and row[2])]


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= _SAME * max(abs(a), abs(b))


def stored_method(result: Result) -> int:
    """The method whose figure a stored result holds: from the marks an earlier re-derivation left
    in `extra`, the drain's counters, else the oldest method whose figure matches the stored one.
    A result without a figure (failed, or nothing measured) is of the current method: no rule
    would give it one."""
    extra, counters = result.extra or {}, result.counters or {}
    if result.status not in USABLE or result.throughput <= 0:
        return METHOD_VERSION
    if "drain_overrun" in extra:
        return 4
    if "drained_batches" in counters:
        return 3  # measured with a drain; a capped one cannot be told apart, so the oldest
    if "drained" in extra:
        return 2 if extra["drained"].get("as_measured") else 3
    if result.window_rates and _same(result.throughput, stats.median(result.window_rates)):
        return 1
    whole = stats.window_rate(result.steps, round_steps(result))
    return 2 if whole > 0 and _same(result.throughput, whole) else 1


# ---------------------------------------------------------------- one method to the next
def _with_figure(result: Result, from_method: int, **changes) -> Result:
    """A copy of `result` with new figures, the old ones kept under extra["rederived"]."""
    before = {"method": from_method, "throughput": result.throughput, "spread": result.spread,
              "status": result.status}
    new = dataclasses.replace(result, extra=copy.deepcopy(result.extra), counters=dict(result.counters), **changes)
    new.extra.setdefault("rederived", []).append(before)
    return new


def _status(result: Result, spread: float, settings: SweepSettings) -> str:
    return NOISY if stats.is_noisy(spread) else OK


def current_status(status: str, spread: float, result: Result) -> str:
    """A stored point's status under this sizer's noisy rule (`stats.is_noisy`), judged from its
    stored spread, so a store measured under an older rule reads by this one (a short window made
    a point noisy once: now it is a mark, `current_marks`). A point without a figure keeps its
    status; one stored as measured with a rate of 0 is an error (it measured nothing)."""
    if status in USABLE and not result.throughput > 0:
        return ERROR
    return _status(result, spread, SweepSettings()) if status in USABLE else status


def current_marks(result: Result) -> tuple[str, ...]:
    """What else marks a point besides its status (`stats.marks`: a short window, a busy host), from
    what it stored; nothing for a point without a figure."""
    if result.status not in USABLE:
        return ()
    steal = (result.counters or {}).get("steal_share")
    return tuple(stats.marks(str((result.extra or {}).get("window_short") or ""),
                             float(steal) if isinstance(steal, (int, float)) else None))


def to_whole_window(result: Result, settings: SweepSettings) -> Result | None:
    """1 -> 2: the whole window's rate over whole loader rounds. A point whose input ended before a
    steady state holds that figure already (`extra["figure"]`)."""
    if (result.extra or {}).get("figure"):
        return result
    rate = stats.window_rate(result.steps, round_steps(result))
    if rate <= 0:
        return None
    return result if _same(rate, result.throughput) else _with_figure(result, 1, throughput=rate)


def to_drained(result: Result, settings: SweepSettings) -> Result | None:
    """2 -> 3: the window opens where the loop was seen to catch up with its loader's backlog
    (`stats.drained_warmup`, at most a third of the sweep's budget past the warm-up). A point with
    no loader, or run with its drain turned off, has no backlog to leave out. Where the rule would
    have measured on past the stored steps, the point cannot be re-derived."""
    if loader_workers(result) < 1 or (result.config or {}).get("drain") is False:
        return result
    if not settings.time_budget_s or not result.steps:
        return None
    rounds = round_steps(result)
    warmup = len(result.steps) - len(_measured(result.steps))
    start = stats.drained_warmup([float(row[0]) for row in result.steps], warmup, settings.time_budget_s / 3, rounds)
    if start == warmup:
        return result
    marked = [[float(row[0]), float(row[1]), 1.0 if i < start else 0.0] for i, row in enumerate(result.steps)]
    throughput, spread, rates = stats.summarize(marked, SUB_WINDOWS, rounds)
    if throughput <= 0 or len(marked) - start < max(MIN_WINDOW_STEPS, 2 * rounds):
        return None
    new = _with_figure(result, 2, throughput=throughput, spread=spread, window_rates=rates, steps=marked,
                       status=_status(result, spread, settings))
    new.counters.update(warmup_steps=start, drain_steps=start - warmup)
    return new


def to_capped_drain(result: Result, settings: SweepSettings) -> Result | None:
    """3 -> 4: a drain that went on at the loader's own pace past DRAIN_MAX_S, and past the short
    window it left, dropped batches made at the pace the window's were: the figure is the drain's
    and the window's samples over their seconds. The window's CPU time per sample no longer goes
    with that figure (the drain's was not counted) and is dropped."""
    counters = result.counters or {}
    drain_s = float(counters.get("drain_seconds") or 0.0)
    measured = _measured(result.steps)
    window_s = sum(float(row[0]) for row in measured)
    samples = float(counters.get("drained_samples") or 0.0) + sum(float(row[1]) for row in measured)
    if not (result.extra or {}).get("window_short") or drain_s <= max(DRAIN_MAX_S, window_s) or samples <= 0:
        return result
    new = _with_figure(result, 3, throughput=samples / (drain_s + window_s))
    new.extra["rederived"][-1]["cpu_ms_per_sample"] = new.counters.pop("cpu_ms_per_sample", None)
    return new


UPGRADES: dict[int, Callable[[Result, SweepSettings], Result | None]] = {
    1: to_whole_window,
    2: to_drained,
    3: to_capped_drain,
}


def bring_to_current(result: Result, method: int, settings: SweepSettings) -> tuple[Result, int]:
    """`result` (of `method`) brought as far toward METHOD_VERSION as its steps allow, and the
    method it reached. Bringing a result of the current method changes nothing."""
    while method < METHOD_VERSION:
        upgraded = UPGRADES[method](result, settings)
        if upgraded is None:
            break
        result, method = upgraded, method + 1
    return result, method


# ---------------------------------------------------------------- for the report
def method_notes(points: Iterable[Point]) -> list[str]:
    """One line per older method that points of this set still carry (points whose steps could
    not bring them to METHOD_VERSION), naming their shapes; nothing when every point is current.
    Points of unknown method (from a points.csv without the column) are left out."""
    behind: dict[int, Counter[str]] = defaultdict(Counter)
    for p in points:
        if p.method is not None and p.method < METHOD_VERSION:
            behind[p.method][f"{p.workload} {p.shape_label()}"] += 1
    notes = []
    for method, shapes in sorted(behind.items()):
        count = sum(shapes.values())
        named = [shape + (f" (x{n})" if n > 1 else "") for shape, n in shapes.items()]
        if len(named) > _NOTE_SHAPES:
            named = named[:_NOTE_SHAPES] + [f"{len(named) - _NOTE_SHAPES} more shapes"]
        were, they = ("s were", "they are") if count != 1 else (" was", "it is")
        notes.append(f"{count} point{were} measured by method {method} (this sizer's is {METHOD_VERSION}) and could "
                     f"not be re-derived from the stored steps, so {they} kept as measured: {', '.join(named)}")
    return notes


def method_summary(points: Iterable[Point]) -> dict[str, object]:
    """This sizer's method and how many points each method measured ("unknown" for points that do
    not say), for results.json."""
    counts: Counter[str] = Counter()
    for p in points:
        counts["unknown" if p.method is None else str(p.method)] += 1
    return {"current": METHOD_VERSION, "points": dict(sorted(counts.items()))}
