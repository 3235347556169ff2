"""cgroup v2 backend: cpuset.cpus for vCPUs (cpu.max where no cpuset can be set, or when asked),
memory.max for RAM (page cache included), io.max for the disk class; cpu.stat, io.stat,
memory.events and memory.peak for the figures.

Placement: v2 lets a cgroup hand controllers to children only while it holds no processes itself,
so groups cannot go beneath the cgroup sizer runs in (it holds sizer, and on a GPU host seen, other
processes too, with only `memory` offered). They go into one `sizer` subtree at the top of the
hierarchy sizer can see, with +cpuset +cpu +io +memory enabled in the top's and `sizer`'s
cgroup.subtree_control. Only sizer's own worker processes are ever moved into them.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable

from sizer.limits import sysfs
from sizer.limits.base import BackendInfo, Enforcement, LimitBackend, LimitGroup, LimitRequest

CONTROLLERS = ("cpuset", "cpu", "io", "memory")
CPU_PERIOD_US = 100_000
# cpu.weight per vCPU (100 = one nice-0 task's worth): N vCPUs weigh like N busy tasks, not one.
WEIGHT_PER_CPU = 100
MAX_WEIGHT = 10_000
# The file in a child group that shows a controller is there for us to write.
_CONTROL_FILE = {"cpuset": "cpuset.cpus", "cpu": "cpu.max", "io": "io.max", "memory": "memory.max"}


def _keyed(text: str) -> dict[str, int]:
    """'key value' lines (cpu.stat, memory.events) -> dict."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


class CgroupV2Group(LimitGroup):
    def __init__(self, backend: "CgroupV2Backend", request: LimitRequest):
        self.request = request
        self.backend = backend
        self.name = sysfs.group_name(request.label)
        self.dir = backend.parent / self.name
        self._removed = False
        sysfs.track(self)
        try:
            self.watchdog()  # before the folder exists, so that it never outlives a killed sizer
            self._create()
        except BaseException:
            self.remove()
            raise

    def cgroup_dirs(self) -> list[Path]:
        return [self.dir]

    def _create(self) -> None:
        req = self.request
        for _ in range(5):  # another sizer may remove an empty `sizer` subtree between the steps
            try:
                with sysfs.TREE_LOCK:  # nor may a thread of this one (remove_parent_if_empty)
                    self.backend.ensure_parent()
                    self.dir.mkdir()
                break
            except FileNotFoundError:
                continue
        else:
            raise OSError(errno.ENOENT, f"cannot create {self.dir}")
        w = self.backend.writable
        if "cpuset" in w and req.cpus:
            sysfs.write_text(self.dir / "cpuset.cpus", ",".join(str(c) for c in req.cpus))
        if "cpu" in w and req.cpus:
            if req.cpu_quota or "cpuset" not in w:
                sysfs.write_text(self.dir / "cpu.max", f"{len(req.cpus) * CPU_PERIOD_US} {CPU_PERIOD_US}")
            sysfs.write_text(self.dir / "cpu.weight", str(min(MAX_WEIGHT, WEIGHT_PER_CPU * len(req.cpus))))
        if "memory" in w and req.memory_bytes:
            sysfs.write_text(self.dir / "memory.max", str(req.memory_bytes))
            if (self.dir / "memory.swap.max").exists():
                # No swap: a cloud shape does not come with the host's swap.
                sysfs.write_text(self.dir / "memory.swap.max", "0")
        t = req.throttle
        if "io" in w and t is not None:
            keys = {"rbps": t.read_bps, "wbps": t.write_bps, "riops": t.read_iops, "wiops": t.write_iops}
            rule = " ".join(f"{k}={int(v)}" for k, v in keys.items() if v)
            if rule:
                sysfs.write_text(self.dir / "io.max", f"{t.device} {rule}")

    def preexec(self) -> Callable[[], None]:
        path = os.fsencode(self.dir / "cgroup.procs")

        def join() -> None:  # runs in the forked child: plain system calls only
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)

        return join

    def enforcement(self) -> Enforcement:
        enf = Enforcement(backend="cgroup-v2")
        details: dict[str, object] = {"group": str(self.dir)}
        w = self.backend.writable
        cpus = []
        if "cpuset" in w:
            value = sysfs.read_text(self.dir / "cpuset.cpus.effective")
            details["cpuset.cpus.effective"] = value
            cpus.append(f"cpuset {value}")
        if "cpu" in w:
            value = sysfs.read_text(self.dir / "cpu.max")
            details["cpu.max"] = value
            quota, _, period = value.partition(" ")
            if quota.isdigit() and period.isdigit():
                cpus.append(f"quota {int(quota) / int(period):g} CPU")
        enf.cpus = " + ".join(cpus) or "not enforced"
        if "memory" in w:
            value = sysfs.read_text(self.dir / "memory.max")
            details["memory.max"] = value
            enf.memory = f"memory.max={value} (page cache included)" if value.isdigit() else "no limit"
        if "io" in w:
            value = sysfs.read_text(self.dir / "io.max")
            details["io.max"] = value
            dev = self.request.throttle.device if self.request.throttle else ""
            if value:
                enf.disk = f"io.max on {dev} ({sysfs.device_name(dev)}): " + value.split(None, 1)[-1]
            else:
                enf.disk = f"no throttle (device {dev or 'unknown'} measured)"
        enf.details = details
        return enf

    def cpu_seconds(self) -> float:
        return _keyed(sysfs.read_text(self.dir / "cpu.stat")).get("usage_usec", 0) / 1e6

    def read_bytes(self) -> int:
        device = self.request.throttle.device if self.request.throttle else None
        total = 0
        for line in sysfs.read_text(self.dir / "io.stat").splitlines():
            parts = line.split()
            if not parts or (device is not None and parts[0] != device):
                continue
            for kv in parts[1:]:
                if kv.startswith("rbytes="):
                    total += int(kv.split("=", 1)[1])
        return total

    def oom_killed(self) -> bool:
        return _keyed(sysfs.read_text(self.dir / "memory.events")).get("oom_kill", 0) > 0

    oom_exact = True

    def memory_peak_bytes(self) -> int | None:
        raw = sysfs.read_text(self.dir / "memory.peak")  # kernel 5.19+
        return int(raw) if raw.isdigit() else None

    def kill_all(self) -> int:
        return sysfs.kill_group_tasks(self.dir, 2.0)

    def remove(self) -> None:
        if self._removed:
            return
        ok = sysfs.remove_dir(self.dir)
        sysfs.remove_parent_if_empty(self.backend.parent)
        if not ok:  # stays tracked and watched: atexit, the watchdog and the next start try again
            raise OSError(errno.EBUSY, f"could not remove cgroup {self.dir}")
        self._removed = True
        self._release_watchdog()
        sysfs.untrack(self)


class CgroupV2Backend(LimitBackend):
    name = "cgroup-v2"

    def __init__(self) -> None:
        _, mount = sysfs.cgroup_mounts()
        self.mount = mount
        self.top = mount[0] if mount else Path("/sys/fs/cgroup")
        own = sysfs.own_cgroups().get("")
        self.own_dir = sysfs.cgroup_dir(mount, own) if (mount and own is not None) else None
        self.parent = self.top / sysfs.PARENT
        self.writable: list[str] = []
        self.enabled_here: list[str] = []  # controllers sizer itself turned on at the top
        self._probed = False
        self.looked = False  # `writable` judged without writing (`look`)

    def look(self) -> list[str]:
        """The controllers a probe would most likely find writable, judged without writing anything
        (a dry run changes nothing on the host): the hierarchy's top is writable and offers them."""
        available = sysfs.read_text(self.top / "cgroup.controllers").split()
        writable = [c for c in CONTROLLERS if c in available] if os.access(self.top, os.W_OK) else []
        self.writable, self._probed, self.looked = writable, True, True
        return writable

    @staticmethod
    def present() -> bool:
        _, mount = sysfs.cgroup_mounts()
        if mount is None:
            return False
        available = sysfs.read_text(mount[0] / "cgroup.controllers").split()
        return any(c in available for c in CONTROLLERS)

    def _enable(self, cgroup: Path, wanted: list[str]) -> list[str]:
        """Turn controllers on for a cgroup's children, one by one; returns those now on."""
        control = cgroup / "cgroup.subtree_control"
        for c in wanted:
            if c in sysfs.read_text(control).split():
                continue
            try:
                sysfs.write_text(control, f"+{c}")
                if cgroup == self.top:
                    self.enabled_here.append(c)
            except OSError:
                pass
        on = sysfs.read_text(control).split()
        return [c for c in wanted if c in on]

    def ensure_parent(self) -> list[str]:
        available = sysfs.read_text(self.top / "cgroup.controllers").split()
        wanted = [c for c in CONTROLLERS if c in available]
        on_top = self._enable(self.top, wanted)
        self.parent.mkdir(exist_ok=True)
        if "cpu" in on_top:
            weight = str(min(MAX_WEIGHT, WEIGHT_PER_CPU * (os.cpu_count() or 1)))
            if sysfs.read_text(self.parent / "cpu.weight") != weight:
                sysfs.write_text(self.parent / "cpu.weight", weight)
        return self._enable(self.parent, on_top)

    def probe(self) -> list[str]:
        made_parent = not self.parent.exists()
        probe = self.parent / sysfs.group_name("probe")
        writable: list[str] = []
        try:
            on = self.ensure_parent()
            probe.mkdir()
            writable = [c for c in on if (probe / _CONTROL_FILE[c]).exists()]
        except OSError:
            writable = []
        finally:
            sysfs.remove_dir(probe, 2.0)
            if made_parent:
                sysfs.remove_parent_if_empty(self.parent)
        self.writable = writable
        self._probed = True
        return writable

    def usable(self) -> bool:
        if not self._probed:
            self.probe()
        return "cpuset" in self.writable or "cpu" in self.writable

    def info(self) -> BackendInfo:
        if not self._probed:
            self.probe()
        at_top = self.own_dir is not None and self.own_dir == self.top
        notes = ["RAM limit includes the page cache (memory.max)"]
        if self.looked:
            notes.append("controllers judged without creating a probe group (a dry run changes nothing)")
        if self.own_dir is not None and not at_top:
            offered = sysfs.read_text(self.own_dir / "cgroup.controllers").split()
            notes.append(
                f"own cgroup {self.own_dir} offers {', '.join(offered) or 'no controllers'} and holds "
                "processes, so groups go into a `sizer` subtree at the top of the hierarchy"
            )
        if self.enabled_here:
            notes.append(f"enabled in {self.top}/cgroup.subtree_control: {', '.join(self.enabled_here)}")
        missing = [c for c in CONTROLLERS if c not in self.writable]
        if missing:
            notes.append("not writable here: " + ", ".join(missing))
        return BackendInfo(
            name=self.name,
            writable=list(self.writable),
            root=str(self.parent),
            placement="beneath own cgroup" if at_top else "sizer subtree at the hierarchy root",
            notes=notes,
        )

    def create(self, request: LimitRequest) -> CgroupV2Group:
        if not self._probed:
            self.probe()
        return CgroupV2Group(self, request)

    def cleanup_leftovers(self) -> list[str]:
        removed = []
        me = os.getpid()
        for g in sysfs.sizer_groups(self.parent):
            pid = sysfs.owner_pid(g.name)
            if pid is None or pid == me or sysfs.pid_alive(pid):
                continue
            if sysfs.remove_dir(g):
                removed.append(str(g))
        sysfs.remove_parent_if_empty(self.parent)
        return removed

    def list_groups(self) -> list[str]:
        out = []
        for g in sysfs.sizer_groups(self.parent):
            out.append(str(g))
            for line in sysfs.read_text(g / "io.max").splitlines():
                out.append(f"{g / 'io.max'}: {line}")
        return out
