"""Limit backends: cgroup v2, cgroup v1 and CPU affinity only, behind one interface (base.py).

`detect_backend()` creates and removes a probe cgroup to find which controllers sizer can really
write here, and returns the best backend: cgroup v2 where its controllers can be enabled, else
cgroup v1, else affinity only (RAM and disk then recorded as not enforced). With `look_only` (a dry
run) it judges the same from what it can read, and writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sizer.errors import SizerError
from sizer.limits.affinity import AffinityBackend
from sizer.limits.base import BackendInfo, DiskThrottle, Enforcement, LimitBackend, LimitGroup, LimitRequest
from sizer.limits.cgroup_v1 import CgroupV1Backend
from sizer.limits.cgroup_v2 import CgroupV2Backend
from sizer.limits.sysfs import block_device_for, device_name

BACKENDS = ("cgroup-v2", "cgroup-v1", "affinity")
_ALIASES = {"v2": "cgroup-v2", "v1": "cgroup-v1", "none": "affinity", "auto": "auto"}
_CLASSES: dict[str, type[CgroupV2Backend] | type[CgroupV1Backend]] = {"cgroup-v2": CgroupV2Backend, "cgroup-v1": CgroupV1Backend}
_cache: dict[str, LimitBackend] = {}


def detect_backend(prefer: str | None = None, look_only: bool = False) -> LimitBackend:
    """The backend to use: `prefer` (or $SIZER_LIMITS) names one, else the best that works here.

    A named cgroup backend that cannot be used is an error (one line saying why); `auto` falls
    back quietly, and the backend's info() says what it enforces. `look_only`: judged without
    creating a probe group (nothing on the host changes); such a judgement is not kept for later.
    """
    wanted = (prefer or os.environ.get("SIZER_LIMITS") or "auto").strip().lower()
    wanted = _ALIASES.get(wanted, wanted)
    if wanted not in BACKENDS and wanted != "auto":
        raise SizerError(f"unknown limit backend {prefer!r} (choose from auto, {', '.join(BACKENDS)})")
    if wanted in _cache:
        return _cache[wanted]
    if look_only:
        # Judged from what can be read: a hierarchy whose cpuset or cpu controller shows.
        return _chosen_backend(wanted, lambda candidate: bool({"cpuset", "cpu"} & set(candidate.look())))
    backend = _chosen_backend(wanted, lambda candidate: candidate.usable())
    _cache[wanted] = backend
    return backend


def _chosen_backend(wanted: str, works: Callable[[CgroupV2Backend | CgroupV1Backend], bool]) -> LimitBackend:
    """The first cgroup backend (v2, then v1, or the one named) that `works`, else affinity.
    A named backend that is missing or does not work is an error."""
    if wanted == "affinity":
        return AffinityBackend()
    for name in ([wanted] if wanted != "auto" else ["cgroup-v2", "cgroup-v1"]):
        cls = _CLASSES[name]
        if not cls.present():
            if wanted != "auto":
                raise SizerError(f"limit backend {name}: no such cgroup hierarchy is mounted here")
            continue
        candidate = cls()
        if works(candidate):
            return candidate
        if wanted != "auto":
            why = "needs root" if os.geteuid() != 0 else "no writable cpuset or cpu controller"
            raise SizerError(f"limit backend {name} cannot create limit groups here ({why})")
    return AffinityBackend()


def _present_backends() -> list[LimitBackend]:
    return [cls() for cls in (CgroupV2Backend, CgroupV1Backend) if cls.present()]


def list_groups() -> list[str]:
    """Every cgroup and throttle of sizer's on this host now, whichever backend made it."""
    out: list[str] = []
    for backend in _present_backends():
        out.extend(backend.list_groups())
    return out


def cleanup_leftovers() -> list[str]:
    """Remove groups (and their throttles) whose sizer process is gone; returns what was removed."""
    removed: list[str] = []
    for backend in _present_backends():
        try:
            removed.extend(backend.cleanup_leftovers())
        except OSError:
            continue
    return removed


__all__ = [
    "BACKENDS",
    "AffinityBackend",
    "BackendInfo",
    "CgroupV1Backend",
    "CgroupV2Backend",
    "DiskThrottle",
    "Enforcement",
    "LimitBackend",
    "LimitGroup",
    "LimitRequest",
    "block_device_for",
    "cleanup_leftovers",
    "detect_backend",
    "device_name",
    "list_groups",
]
