"""Unprivileged fallback: CPU affinity only. RAM and disk are recorded as *not enforced*.

Figures come from the resource usage of sizer's reaped children (the worker and, through it, its
own reaped children), since there is no cgroup to read. One point runs at a time, so the change in
RUSAGE_CHILDREN across a point is that point's worker.
"""

from __future__ import annotations

import os
import resource
from typing import Callable

from sizer.limits.base import BackendInfo, Enforcement, LimitBackend, LimitGroup, LimitRequest


class AffinityGroup(LimitGroup):
    oom_exact = False

    def __init__(self, request: LimitRequest):
        self.request = request
        self._start = resource.getrusage(resource.RUSAGE_CHILDREN)

    def preexec(self) -> Callable[[], None]:
        cpus = set(self.request.cpus)

        def pin() -> None:  # runs in the forked child
            if cpus:
                os.sched_setaffinity(0, cpus)

        return pin

    def enforcement(self) -> Enforcement:
        cpus = ",".join(str(c) for c in self.request.cpus)
        return Enforcement(
            backend="affinity",
            cpus=f"affinity {cpus}" if cpus else "not enforced",
            memory="not enforced" if self.request.memory_bytes else "no limit",
            disk="not enforced" if self._throttled() else "no throttle",
            details={"reason": "no writable cgroup controllers (not root, or none delegated)"},
        )

    def _throttled(self) -> bool:
        t = self.request.throttle
        return t is not None and any((t.read_bps, t.write_bps, t.read_iops, t.write_iops))

    def cpu_seconds(self) -> float:
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (now.ru_utime + now.ru_stime) - (self._start.ru_utime + self._start.ru_stime)

    def read_bytes(self) -> int:
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        return int(now.ru_inblock - self._start.ru_inblock) * 512  # blocks of 512 bytes

    def oom_killed(self) -> bool:
        return False  # no memory group, so no OOM events of our own to read; never guessed

    def memory_peak_bytes(self) -> int | None:
        return None  # RUSAGE_CHILDREN keeps the largest child ever, not this point's; the worker reports its own

    def remove(self) -> None:
        self._release_watchdog()


class AffinityBackend(LimitBackend):
    name = "affinity"

    def info(self) -> BackendInfo:
        return BackendInfo(
            name=self.name,
            writable=["affinity"],
            root="",
            placement="no cgroups: CPU affinity of the worker process",
            notes=["RAM and disk limits are not enforced; run as root on a cgroup host to enforce them"],
        )

    def create(self, request: LimitRequest) -> AffinityGroup:
        return AffinityGroup(request)

    def cleanup_leftovers(self) -> list[str]:
        return []

    def list_groups(self) -> list[str]:
        return []
