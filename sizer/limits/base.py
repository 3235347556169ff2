"""The interface every limit backend implements (cgroup v2, cgroup v1, affinity only).

A backend turns a `LimitRequest` (which CPUs, how much memory, which disk throttle) into a
`LimitGroup`: a place a worker process joins before it execs, that can be read back (CPU time,
bytes read, OOM kills) and that is removed on exit. Only processes sizer starts ever join a group.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sizer.limits.watchdog import Watchdog


@dataclass(frozen=True)
class DiskThrottle:
    device: str  # "major:minor" of the block device holding the dataset
    read_bps: int | None = None
    write_bps: int | None = None
    read_iops: int | None = None
    write_iops: int | None = None


@dataclass(frozen=True)
class LimitRequest:
    cpus: tuple[int, ...]  # host CPU ids (hardware threads) the shape gets
    memory_bytes: int | None = None  # None = no memory limit
    throttle: DiskThrottle | None = None  # None = no disk throttle
    label: str = "point"  # part of the cgroup's name, for people reading /sys/fs/cgroup
    # A CPU-time quota of len(cpus) on top of the cpuset. Off by default: pinned to N CPUs a group
    # cannot use more than N anyway, and CFS bandwidth control throttles a group that runs flat out
    # at its quota in slivers at period ends. A backend that cannot set a cpuset uses the quota
    # whatever this says: it is then the only CPU limit.
    cpu_quota: bool = False


@dataclass
class Enforcement:
    """What a group really enforces, read back from the kernel after setting it."""
    backend: str
    cpus: str = ""
    memory: str = "not enforced"
    disk: str = "not enforced"
    details: dict[str, Any] = field(default_factory=dict)


class LimitGroup(abc.ABC):
    """One shape's limits, live. Use as a context manager: removed on exit whatever happened.

    Each group has a watchdog process (sizer/limits/watchdog.py): should sizer be killed outright,
    it ends the group's processes and removes the group. A cgroup backend starts it with the group;
    `remove()` releases it.
    """
    request: LimitRequest
    _watchdog: "Watchdog | None" = None

    def cgroup_dirs(self) -> list[Path]:
        """The group's cgroup folders, created or about to be (none for affinity only)."""
        return []

    def watchdog(self) -> "Watchdog":
        """The group's watchdog, started on first use."""
        if self._watchdog is None:
            self._watchdog = Watchdog(self.cgroup_dirs())
        return self._watchdog

    def _release_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.release()
            self._watchdog = None

    def kill_all(self) -> int:
        """SIGKILL every process in the group and wait until it is empty; returns how many."""
        return 0

    @abc.abstractmethod
    def preexec(self) -> Callable[[], None]:
        """A function for subprocess's preexec_fn: moves the new child (and only it) into the group."""
    @abc.abstractmethod
    def enforcement(self) -> Enforcement: ...

    @abc.abstractmethod
    def cpu_seconds(self) -> float:
        """CPU time used by the group's processes so far (cgroup accounting)."""
    @abc.abstractmethod
    def read_bytes(self) -> int:
        """Bytes read from the throttled device by the group's processes so far."""
    @abc.abstractmethod
    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer killed a process of this group (from the group's events)."""
    @abc.abstractmethod
    def memory_peak_bytes(self) -> int | None: ...

    @abc.abstractmethod
    def remove(self) -> None:
        """Remove the group and its throttle; idempotent."""
    def __enter__(self) -> "LimitGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@dataclass
class BackendInfo:
    name: str  # "cgroup-v2", "cgroup-v1" or "affinity"
    writable: list[str]  # controllers sizer can set: some of cpuset, cpu, memory, io/blkio
    root: str  # where sizer's groups go
    placement: str  # "beneath own cgroup" or "sizer subtree at the hierarchy root"
    notes: list[str] = field(default_factory=list)


class LimitBackend(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def info(self) -> BackendInfo: ...

    @abc.abstractmethod
    def create(self, request: LimitRequest) -> LimitGroup: ...

    @abc.abstractmethod
    def cleanup_leftovers(self) -> list[str]:
        """Remove groups and throttles left by a killed sweep; returns what was removed."""
    @abc.abstractmethod
    def list_groups(self) -> list[str]:
        """Every group and throttle of sizer's that exists now."""
