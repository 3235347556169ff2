"""cgroup v1 backend: cpuset for vCPUs (a cpu quota where no cpuset can be set, or when asked),
memory.limit_in_bytes for RAM (page cache included), blkio.throttle.* for the disk class, cpuacct
and blkio statistics for the figures.

Groups go beneath this process's own cgroup in every hierarchy, inside one `sizer` folder:
`/sys/fs/cgroup/<controller>/<own path>/sizer/sizer-<pid>-<label>-<n>`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable

from sizer.limits import sysfs
from sizer.limits.base import BackendInfo, Enforcement, LimitBackend, LimitGroup, LimitRequest

CONTROLLERS = ("cpuset", "cpu", "cpuacct", "memory", "blkio")
# A control file each controller's groups have: where it exists and its folder is writable, a probe
# group would most likely work (`CgroupV1Backend.look`).
_CONTROL_FILE = {"cpuset": "cpuset.cpus", "cpu": "cpu.cfs_quota_us", "cpuacct": "cpuacct.usage",
                 "memory": "memory.limit_in_bytes", "blkio": "blkio.throttle.read_bps_device"}
CFS_PERIOD_US = 100_000
# CPU weight per vCPU (cpu.shares; 1024 = one nice-0 task). Without it a group of N busy threads
# would weigh like one task against the host's other tasks; N vCPUs weigh like N tasks instead.
SHARES_PER_CPU = 1024
MAX_SHARES = 262_144
_UNLIMITED = 2**62  # memory.limit_in_bytes reads back a page-rounded LONG_MAX when unset
_THROTTLE_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}


def _parents() -> dict[str, Path]:
    """controller -> the `sizer` folder beneath our own cgroup in that hierarchy."""
    mounts, _ = sysfs.cgroup_mounts()
    own = sysfs.own_cgroups()
    out = {}
    for c in CONTROLLERS:
        if c in mounts and c in own:
            out[c] = sysfs.cgroup_dir(mounts[c], own[c]) / sysfs.PARENT
    return out


def _ensure_parent(controller: str, parent: Path) -> None:
    parent.mkdir(exist_ok=True)
    if controller == "cpu":
        shares = min(MAX_SHARES, SHARES_PER_CPU * (os.cpu_count() or 1))
        if sysfs.read_text(parent / "cpu.shares") != str(shares):
            sysfs.write_text(parent / "cpu.shares", str(shares))
    if controller == "cpuset":
        # A new cpuset is empty; it must get CPUs and memory nodes before children can have any.
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not sysfs.read_text(parent / name):
                value = sysfs.read_text(parent.parent / name)
                sysfs.write_text(parent / name, value)


class CgroupV1Group(LimitGroup):
    def __init__(self, backend: "CgroupV1Backend", request: LimitRequest):
        self.request = request
        self.backend = backend
        self.name = sysfs.group_name(request.label)
        self.dirs: dict[str, Path] = {}
        self._removed = False
        self._oom_field = True
        sysfs.track(self)
        try:
            self.watchdog()  # before any folder exists, so that none outlives a killed sizer
            self._create()
        except BaseException:
            self.remove()
            raise

    def cgroup_dirs(self) -> list[Path]:
        return list(dict.fromkeys(self.backend.parents[c] / self.name for c in self.backend.writable))

    # ------------------------------------------------------------ setup
    def _mkdir(self, controller: str) -> Path:
        parent = self.backend.parents[controller]
        for _ in range(5):  # another sizer may remove an empty `sizer` folder between the two steps
            d = parent / self.name
            try:
                with sysfs.TREE_LOCK:  # nor may a thread of this one (remove_parent_if_empty)
                    _ensure_parent(controller, parent)
                    d.mkdir(exist_ok=True)
                return d
            except FileNotFoundError:
                continue
        raise OSError(errno.ENOENT, f"cannot create {parent / self.name}")

    def _create(self) -> None:
        req = self.request
        for c in self.backend.writable:
            self.dirs[c] = self._mkdir(c)
        if "cpuset" in self.dirs:
            d = self.dirs["cpuset"]
            sysfs.write_text(d / "cpuset.mems", sysfs.read_text(d.parent / "cpuset.mems"))
            sysfs.write_text(d / "cpuset.cpus", ",".join(str(c) for c in req.cpus))
        if "cpu" in self.dirs and req.cpus:
            d = self.dirs["cpu"]
            if req.cpu_quota or "cpuset" not in self.dirs:
                sysfs.write_text(d / "cpu.cfs_period_us", str(CFS_PERIOD_US))
                sysfs.write_text(d / "cpu.cfs_quota_us", str(len(req.cpus) * CFS_PERIOD_US))
            sysfs.write_text(d / "cpu.shares", str(min(MAX_SHARES, SHARES_PER_CPU * len(req.cpus))))
        if "memory" in self.dirs and req.memory_bytes:
            d = self.dirs["memory"]
            sysfs.write_text(d / "memory.limit_in_bytes", str(req.memory_bytes))
            if (d / "memory.memsw.limit_in_bytes").exists():
                # Memory plus swap at the same limit: a shape cannot borrow swap the host happens to have.
                sysfs.write_text(d / "memory.memsw.limit_in_bytes", str(req.memory_bytes))
            self._oom_field = "oom_kill " in sysfs.read_text(d / "memory.oom_control")
        t = req.throttle
        if "blkio" in self.dirs and t is not None:
            d = self.dirs["blkio"]
            for attr, fname in _THROTTLE_FILES.items():
                value = getattr(t, attr)
                if value:
                    sysfs.write_text(d / fname, f"{t.device} {int(value)}")

    # ------------------------------------------------------------ LimitGroup
    def _procs_files(self) -> list[bytes]:
        seen: dict[Path, None] = {}
        for d in self.dirs.values():
            seen.setdefault(d / "cgroup.procs", None)
        return [os.fsencode(p) for p in seen]

    def preexec(self) -> Callable[[], None]:
        files = self._procs_files()

        def join() -> None:  # runs in the forked child: plain system calls only
            pid = str(os.getpid()).encode()
            for path in files:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)

        return join

    def enforcement(self) -> Enforcement:
        enf = Enforcement(backend="cgroup-v1")
        details: dict[str, object] = {"groups": {c: str(d) for c, d in self.dirs.items()}}
        cpus = []
        if "cpuset" in self.dirs:
            value = sysfs.read_text(self.dirs["cpuset"] / "cpuset.cpus")
            details["cpuset.cpus"] = value
            cpus.append(f"cpuset {value}")
        if "cpu" in self.dirs:
            quota = sysfs.read_text(self.dirs["cpu"] / "cpu.cfs_quota_us")
            period = sysfs.read_text(self.dirs["cpu"] / "cpu.cfs_period_us")
            details["cpu.cfs_quota_us"], details["cpu.cfs_period_us"] = quota, period
            if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit():
                cpus.append(f"quota {int(quota) / int(period):g} CPU")
        enf.cpus = " + ".join(cpus) or "not enforced"
        if "memory" in self.dirs:
            raw = sysfs.read_text(self.dirs["memory"] / "memory.limit_in_bytes")
            details["memory.limit_in_bytes"] = raw
            if raw.isdigit() and int(raw) < _UNLIMITED:
                enf.memory = f"memory.limit_in_bytes={raw} (page cache included)"
            else:
                enf.memory = "no limit"
        if "blkio" in self.dirs:
            rules = []
            for attr, fname in _THROTTLE_FILES.items():
                text = sysfs.read_text(self.dirs["blkio"] / fname)
                details[fname] = text
                if text:
                    rules.append(f"{attr}={text.split()[-1]}")
            dev = self.request.throttle.device if self.request.throttle else ""
            if rules:
                enf.disk = f"blkio.throttle on {dev} ({sysfs.device_name(dev)}): " + " ".join(rules)
            else:
                enf.disk = f"no throttle (device {dev or 'unknown'} measured)"
        enf.details = details
        return enf

    def cpu_seconds(self) -> float:
        d = self.dirs.get("cpuacct")
        raw = sysfs.read_text(d / "cpuacct.usage") if d else ""
        return int(raw) / 1e9 if raw.isdigit() else 0.0

    def read_bytes(self) -> int:
        d = self.dirs.get("blkio")
        if d is None:
            return 0
        device = self.request.throttle.device if self.request.throttle else None
        total = 0
        for line in sysfs.read_text(d / "blkio.throttle.io_service_bytes_recursive").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == "Read" and (device is None or parts[0] == device):
                total += int(parts[2])
        return total

    def oom_killed(self) -> bool:
        d = self.dirs.get("memory")
        if d is None:
            return False
        fields = dict(
            line.split(None, 1) for line in sysfs.read_text(d / "memory.oom_control").splitlines() if " " in line
        )
        if "oom_kill" in fields:
            return int(fields["oom_kill"]) > 0
        # Kernels before 4.13 have no oom_kill count: the limit was hit; the runner also wants SIGKILL.
        raw = sysfs.read_text(d / "memory.failcnt")
        return raw.isdigit() and int(raw) > 0

    @property
    def oom_exact(self) -> bool:
        """False where OOM kills are inferred from memory.failcnt (old kernels)."""
        return self._oom_field

    def memory_peak_bytes(self) -> int | None:
        d = self.dirs.get("memory")
        raw = sysfs.read_text(d / "memory.max_usage_in_bytes") if d else ""
        return int(raw) if raw.isdigit() else None

    def kill_all(self) -> int:
        """SIGKILL every process in the group (they are all sizer's worker and its children)."""
        return sum(sysfs.kill_group_tasks(d, 2.0) for d in dict.fromkeys(self.dirs.values()))

    def remove(self) -> None:
        if self._removed:
            return
        failed = []
        for d in dict.fromkeys(self.dirs.values()):
            if not sysfs.remove_dir(d):
                failed.append(str(d))
        for c in self.dirs:
            sysfs.remove_parent_if_empty(self.backend.parents[c])
        if failed:  # stays tracked and watched: atexit, the watchdog and the next start try again
            raise OSError(errno.EBUSY, f"could not remove cgroup(s): {', '.join(failed)}")
        self._removed = True
        self._release_watchdog()
        sysfs.untrack(self)


class CgroupV1Backend(LimitBackend):
    name = "cgroup-v1"

    def __init__(self) -> None:
        self.parents = _parents()
        self.writable: list[str] = []
        self._probed = False
        self.looked = False  # `writable` judged without writing (`look`)

    @staticmethod
    def present() -> bool:
        mounts, _ = sysfs.cgroup_mounts()
        return any(c in mounts for c in CONTROLLERS)

    def look(self) -> list[str]:
        """The controllers a probe would most likely find writable, judged without writing anything
        (a dry run changes nothing on the host): sizer's folder, or the one it would be made in, is
        writable and holds the controller's control file."""
        writable = []
        for c, parent in self.parents.items():
            folder = parent if parent.exists() else parent.parent
            if os.access(folder, os.W_OK) and (folder / _CONTROL_FILE[c]).exists():
                writable.append(c)
        self.writable, self._probed, self.looked = writable, True, True
        return writable

    def probe(self) -> list[str]:
        """Create and remove a probe group in every hierarchy; the controllers where that and a
        representative write work are the ones this backend uses."""
        writable = []
        for c, parent in self.parents.items():
            made_parent = not parent.exists()
            probe = parent / sysfs.group_name("probe")
            try:
                _ensure_parent(c, parent)
                probe.mkdir()
                if c == "cpuset":
                    sysfs.write_text(probe / "cpuset.mems", sysfs.read_text(parent / "cpuset.mems"))
                    sysfs.write_text(probe / "cpuset.cpus", sysfs.read_text(parent / "cpuset.cpus"))
                elif c == "memory":
                    sysfs.write_text(probe / "memory.limit_in_bytes", "-1")
                elif c == "cpu":
                    sysfs.write_text(probe / "cpu.cfs_quota_us", "-1")
                elif c == "cpuacct":
                    if not (probe / "cpuacct.usage").exists():
                        raise OSError(errno.ENOENT, "no cpuacct.usage")
                elif c == "blkio":
                    if not (probe / "blkio.throttle.read_bps_device").exists():
                        raise OSError(errno.ENOENT, "no blkio throttle files")
                writable.append(c)
            except OSError:
                pass
            finally:
                sysfs.remove_dir(probe, 2.0)
                if made_parent:
                    sysfs.remove_parent_if_empty(parent)
        self.writable = writable
        self._probed = True
        return writable

    def usable(self) -> bool:
        if not self._probed:
            self.probe()
        # vCPUs must be enforceable at the least; the rest is reported as enforced or not.
        return "cpuset" in self.writable or "cpu" in self.writable

    def info(self) -> BackendInfo:
        if not self._probed:
            self.probe()
        notes = ["RAM limit includes the page cache (memory.limit_in_bytes)"]
        if self.looked:
            notes.append("controllers judged without creating a probe group (a dry run changes nothing)")
        if "blkio" in self.writable:
            notes.append("blkio throttles reads and direct writes; buffered writeback is not throttled on cgroup v1")
        missing = [c for c in CONTROLLERS if c not in self.writable]
        if missing:
            notes.append("not writable here: " + ", ".join(missing))
        roots = sorted({str(self.parents[c]) for c in self.writable})
        return BackendInfo(
            name=self.name,
            writable=list(self.writable),
            root=", ".join(roots),
            placement="beneath own cgroup",
            notes=notes,
        )

    def create(self, request: LimitRequest) -> CgroupV1Group:
        if not self._probed:
            self.probe()
        return CgroupV1Group(self, request)

    def _all_groups(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for parent in self.parents.values():
            for g in sysfs.sizer_groups(parent):
                seen.setdefault(g, None)
        return list(seen)

    def cleanup_leftovers(self) -> list[str]:
        removed = []
        me = os.getpid()
        for g in self._all_groups():
            pid = sysfs.owner_pid(g.name)
            if pid is None or pid == me or sysfs.pid_alive(pid):
                continue
            if sysfs.remove_dir(g):
                removed.append(str(g))
        for parent in self.parents.values():
            sysfs.remove_parent_if_empty(parent)
        return removed

    def list_groups(self) -> list[str]:
        out = []
        for g in self._all_groups():
            out.append(str(g))
            for fname in _THROTTLE_FILES.values():  # only the blkio hierarchy has these files
                for line in sysfs.read_text(g / fname).splitlines():
                    out.append(f"{g / fname}: {line}")
        return out
