"""A clock for tests of timing logic: time moves only when the test says so.

The meter (`workloads.measure.Meter`), the step clock (`workloads.loop.StepClock`) and the CPU probe
take a clock, a callable returning seconds; a test hands them a `FakeClock` and `sleep`s on it
instead of on the wall clock, so what they decide does not depend on how busy the host is.
"""

from __future__ import annotations


class FakeClock:
    """Seconds since an arbitrary start; `sleep(s)` moves them on, nothing else does."""

    def __init__(self, start: float = 1000.0):
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot sleep {seconds} s")
        self.now += seconds
