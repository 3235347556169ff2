"""The host's speed over a sweep: the per-vCPU calibration measured again at the start of every run
of the sweep, after every defaults.INTERVAL_S of measuring, and at the end. Each entry runs the
calibration defaults.REPEATS times in one worker and is kept in the sweep's calibration record:

    calibration["timeline"] = [{"at_s": seconds since the sweep started, "ips": [each repeat's
                                images/s], "median": float, "spread": (max - min) / median}, ...]

A resumed sweep appends to its timeline. On lent GPU machines the host's speed moved by 20% within
minutes: the timeline tells a slow stretch of the host from a slow shape."""

from __future__ import annotations

import statistics
import time
from typing import Any

from sizer.points import USABLE_STATUSES
from sizer.runner import PointRun
from sizer.shapes import InstanceShape, PlannedPoint
from sizer.store import Store
from sizer.sweep import defaults
from sizer.sweep.measure import measure_point
from sizer.sweep.plan import CALIBRATION_WORKLOAD, SweepPlan
from sizer.units import GIB


def alone_point(plan: SweepPlan, config: dict[str, Any] | None = None) -> PlannedPoint:
    """The calibration's point: one vCPU, the host's RAM (no memory limit is set), an unthrottled disk."""
    disk = "local-nvme" if "local-nvme" in plan.disk_table else next(iter(plan.disk_table))
    return PlannedPoint(CALIBRATION_WORKLOAD, plan.profile, InstanceShape(1, plan.host_ram / GIB, disk), dict(config or {}))


def measure_repeats(plan: SweepPlan, repeats: int = defaults.REPEATS,
                    budget_s: float = defaults.REPEAT_BUDGET_S) -> PointRun:
    """One calibration worker measuring `repeats` times (REPEATS), each with `budget_s` (REPEAT_BUDGET_S)."""
    point = alone_point(plan, {"repeats": repeats})
    return measure_point(plan, point, {}, memory_limit=False, time_budget_s=budget_s)


def entry_of(run: PointRun, at_s: float) -> dict[str, Any] | None:
    """The timeline entry of a repeats run, None where no repeat measured a rate."""
    result = run.result
    if result.status not in USABLE_STATUSES:
        return None
    rates = result.extra.get("repeat_rates") or [result.throughput]
    ips = [float(r) for r in rates if isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0]
    if not ips:
        return None
    median = statistics.median(ips)
    return {"at_s": round(at_s, 1), "ips": ips, "median": median, "spread": (max(ips) - min(ips)) / median}


def start_spread(calibration: dict[str, Any] | None) -> float | None:
    """The spread of the sweep's first entry: its host at the start."""
    timeline = (calibration or {}).get("timeline") or []
    first = timeline[0] if timeline and isinstance(timeline[0], dict) else {}
    spread = first.get("spread")
    return float(spread) if isinstance(spread, (int, float)) else None


class HostSpeed:
    """When one run of a sweep measures the host's speed, and each entry stored at once in the
    sweep's calibration record. `started` is the sweep's start (time.time(), as the store keeps it)."""

    def __init__(self, plan: SweepPlan, store: Store, sweep_id: int, started: float):
        self.plan, self.store, self.sweep_id, self.started = plan, store, sweep_id, started
        self.calibration: dict[str, Any] = {}
        self.last: float | None = None  # time.monotonic() of this run's last entry
        self.points_since = 0  # points measured since it

    @property
    def enabled(self) -> bool:
        return CALIBRATION_WORKLOAD in self.plan.classes and bool(self.calibration)

    def at_s(self) -> float:
        return max(0.0, time.time() - self.started)

    def begin(self, calibration: dict[str, Any], measured_now: bool) -> dict[str, Any] | None:
        """Take the sweep's calibration; one measured just now holds this run's start entry, else
        one is measured (returned; None where it was measured just now or failed)."""
        self.calibration = calibration
        if measured_now:
            self.last = time.monotonic()
            return None
        return self.measure() if self.enabled else None

    def point_done(self) -> None:
        self.points_since += 1

    def due(self) -> bool:
        """INTERVAL_S of measuring since the last entry."""
        return (self.enabled and self.points_since > 0 and self.last is not None
                and time.monotonic() - self.last >= defaults.INTERVAL_S)

    def measure(self) -> dict[str, Any] | None:
        """An entry now, appended to the timeline and stored; None where no repeat measured."""
        at_s = self.at_s()
        entry = entry_of(measure_repeats(self.plan), at_s)
        self.last, self.points_since = time.monotonic(), 0
        if entry is None:
            return None
        self.calibration.setdefault("timeline", []).append(entry)
        self.store.set_calibration(self.sweep_id, self.calibration)
        return entry


def describe(entry: dict[str, Any], unit: str = "images/s") -> str:
    """One line for the progress output."""
    return (f"host speed at {entry['at_s'] / 60:.1f} min: {entry['median']:.0f} {unit} per vCPU "
            f"(repeats spread {entry['spread']:.0%})")
