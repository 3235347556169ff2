"""What this host offers: CPU topology, RAM, GPUs, the disk under a path and the limit backend.

Everything here reads the kernel (sysfs, procfs), NVML and the installed frameworks; nothing is
changed except the probe cgroup the limit backend creates and removes to learn what it may write.
`probe_host` returns plain JSON-friendly data that is stored with every sweep.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from sizer.errors import SizerError
from sizer.limits import detect_backend

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_BLOCK_BY_DEV = Path("/sys/dev/block")
DMI = Path("/sys/class/dmi/id")
CPUINFO = Path("/proc/cpuinfo")
# Words in the firmware's product name or vendor that only a virtual machine carries.
_VM_FIRMWARE_WORDS = ("kvm", "qemu", "vmware", "virtualbox", "innotek", "xen", "virtual machine", "bochs",
                      "bhyve", "parallels", "openstack", "google compute engine", "cloud hypervisor", "amazon ec2")
MOUNTINFO = Path("/proc/self/mountinfo")

# Drivers through which a hypervisor changes a guest's memory while it runs: MemTotal is then the
# figure of the moment (a VM may start small and grow as memory is used), not a fixed size.
_MEMORY_RESIZING_DRIVERS = {
    "virtio_balloon": Path("/sys/bus/virtio/drivers/virtio_balloon"),
    "virtio_mem": Path("/sys/bus/virtio/drivers/virtio_mem"),
    "hv_balloon": Path("/sys/bus/vmbus/drivers/hv_balloon"),
}
_XEN_BALLOON = Path("/sys/devices/system/xen_memory")


def parse_cpu_list(text: str) -> list[int]:
    """The kernel's CPU list format ('0-3,8,10-11') -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            first, last = part.split("-", 1)
            cpus.extend(range(int(first), int(last) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str:
    text = _read(Path("/proc/cpuinfo")) or ""
    for key in ("model name", "Model Name", "Hardware", "cpu model", "Processor"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _detect_virt_tool(tool: str) -> str | None:
    """`systemd-detect-virt --vm`: the hypervisor's name, "none" on bare metal, None if it did not answer."""
    try:
        done = subprocess.run([tool, "--vm"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    name = done.stdout.strip()
    return name if name and done.returncode in (0, 1) else None


def hypervisor(tool: str | None = "systemd-detect-virt", dmi: Path = DMI, cpuinfo: Path = CPUINFO) -> str | None:
    """The hypervisor this host runs under, or None on bare metal. Asked in turn: `systemd-detect-virt
    --vm` where installed (containers do not count), the firmware's product name and vendor (an
    EC2 `.metal` product is bare metal), then the CPU's `hypervisor` flag."""
    found = shutil.which(tool) if tool else None
    answer = _detect_virt_tool(found) if found else None
    if answer is not None:
        return None if answer == "none" else answer
    product, vendor = (_read(dmi / name) or "" for name in ("product_name", "sys_vendor"))
    firmware = f"{vendor} {product}".strip()
    if "metal" not in product.lower() and any(word in firmware.lower() for word in _VM_FIRMWARE_WORDS):
        return firmware
    for line in (_read(cpuinfo) or "").splitlines():
        if line.startswith("flags") and " hypervisor " in f"{line} ":
            return "hypervisor CPU flag"
    return None


def cpu_info() -> dict[str, Any]:
    """Sockets, physical cores, hardware threads and which threads share a core (SMT siblings).

    A vCPU as clouds sell it is one hardware thread; shapes take whole sibling pairs where SMT
    exists, so the sibling map is part of the answer.
    """
    online_text = _read(SYS_CPU / "online")
    online = parse_cpu_list(online_text) if online_text else list(range(os.cpu_count() or 1))
    packages: set[str] = set()
    groups: set[tuple[int, ...]] = set()
    topology_found = False
    for cpu in online:
        topo = SYS_CPU / f"cpu{cpu}" / "topology"
        package = _read(topo / "physical_package_id")
        siblings = _read(topo / "thread_siblings_list")
        if package is not None:
            packages.add(package)
        if siblings:
            topology_found = True
            groups.add(tuple(c for c in parse_cpu_list(siblings) if c in online) or (cpu,))
        else:
            groups.add((cpu,))
    siblings_map = sorted([list(g) for g in groups])
    physical_cores = len(siblings_map) if topology_found else (psutil.cpu_count(logical=False) or len(online))
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    try:
        usable = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = list(online)
    vm = hypervisor()
    return {
        "model": _cpu_model(),
        "architecture": platform.machine(),
        "sockets": len(packages) or 1,
        "physical_cores": physical_cores,
        "hardware_threads": len(online),
        "threads_per_core": max((len(g) for g in siblings_map), default=1),
        "smt": any(len(g) > 1 for g in siblings_map),
        "siblings": siblings_map,
        "online": online,
        "usable": usable,  # this process's affinity: what sizer may hand to shapes
        "numa_nodes": len(nodes) or 1,
        "virtual_machine": vm is not None,
        "hypervisor": vm,
    }


def _memory_resizing_drivers() -> list[str]:
    found = []
    for name, driver in _MEMORY_RESIZING_DRIVERS.items():
        # A bound device shows up as a link inside the driver's directory.
        if driver.is_dir() and any(p.is_symlink() for p in driver.iterdir()):
            found.append(name)
    if _XEN_BALLOON.is_dir():
        found.append("xen_balloon")
    return found


def _own_memory_cgroup_limit() -> int | None:
    """The memory limit of the cgroup this process runs in, if one is set below the host's RAM."""
    text = _read(Path("/proc/self/cgroup")) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if "memory" in controllers.split(","):
            candidates = [Path("/sys/fs/cgroup/memory") / rel.lstrip("/") / "memory.limit_in_bytes"]
        elif controllers == "":
            candidates = [Path("/sys/fs/cgroup") / rel.lstrip("/") / "memory.max"]
        else:
            continue
        for candidate in candidates:
            value = _read(candidate)
            if value and value.isdigit():
                limit = int(value)
                # cgroup v1 writes "no limit" as a huge page-rounded number.
                if limit < psutil.virtual_memory().total:
                    return limit
    return None


def memory_info() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    notes = []
    drivers = _memory_resizing_drivers()
    if drivers:
        notes.append(
            f"virtual machine with {', '.join(drivers)}: the hypervisor can resize memory while it runs, "
            "so total_bytes is the figure of the moment (it may grow as memory is used)"
        )
    limit = _own_memory_cgroup_limit()
    if limit is not None:
        notes.append("sizer's own cgroup limits memory below the host total (cgroup_limit_bytes)")
    return {
        "total_bytes": vm.total,
        "total_gib": round(vm.total / 1024**3, 2),
        "available_bytes": vm.available,
        "swap_bytes": psutil.swap_memory().total,
        "cgroup_limit_bytes": limit,
        "resizable_by": drivers,
        "notes": notes,
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info() -> dict[str, Any]:
    """GPUs through NVML. No GPU is a normal answer (count 0 and a reason), never an error."""
    try:
        import pynvml
    except ImportError:
        return {"count": 0, "devices": [], "driver": None, "reason": "nvidia-ml-py (pynvml) is not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"count": 0, "devices": [], "driver": None, "reason": f"no NVIDIA driver on this host (NVML: {exc})"}
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda_driver = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        except pynvml.NVMLError:
            cuda_driver = None
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            device = {
                "index": index,
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "memory_bytes": int(memory.total),
                "memory_gib": round(memory.total / 1024**3, 1),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "pci_bus_id": _text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
            }
            try:
                device["mig_enabled"] = bool(pynvml.nvmlDeviceGetMigMode(handle)[0])
            except pynvml.NVMLError:
                device["mig_enabled"] = False
            devices.append(device)
    finally:
        pynvml.nvmlShutdown()
    info: dict[str, Any] = {"count": len(devices), "devices": devices, "driver": driver, "cuda_driver": cuda_driver}
    if not devices:
        info["reason"] = "the NVIDIA driver is loaded but sees no GPU"
    return info


def framework_versions() -> dict[str, Any]:
    """torch and torchvision (and the CUDA/cuDNN they were built with) when importable."""
    out: dict[str, Any] = {}
    try:
        import torch

        out["torch"] = {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "cuda_available": bool(torch.cuda.is_available()),
        }
    except ImportError as exc:
        out["torch"] = {"version": None, "reason": f"not importable: {exc}"}
    try:
        import torchvision

        cuda = getattr(torchvision.version, "cuda", None)
        if isinstance(cuda, int):  # torchvision writes CUDA 13.0 as 13000
            cuda = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        out["torchvision"] = {"version": torchvision.__version__, "cuda": cuda}
    except ImportError as exc:
        out["torchvision"] = {"version": None, "reason": f"not importable: {exc}"}
    return out


def _unescape_mount(text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def _mounts() -> list[dict[str, str]]:
    mounts = []
    for line in (_read(MOUNTINFO) or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mounts.append(
            {
                "dev": fields[2],
                "mount_point": _unescape_mount(fields[4]),
                "fstype": tail[0],
                "source": _unescape_mount(tail[1]),
                "options": fields[5] if len(fields) > 5 else "",
            }
        )
    return mounts


def _mount_of(real: str, dev: str) -> dict[str, str] | None:
    """The mount holding `real`: the longest mount point above it, preferring the one with its device."""

    def above(m: dict[str, str]) -> bool:
        mp = m["mount_point"]
        return real == mp or real.startswith(mp.rstrip("/") + "/")

    candidates = [m for m in _mounts() if above(m)]
    if not candidates:
        return None
    same_dev = [m for m in candidates if m["dev"] == dev] or candidates
    longest = max(len(m["mount_point"]) for m in same_dev)
    # Later entries over-mount earlier ones at the same point.
    return [m for m in same_dev if len(m["mount_point"]) == longest][-1]


def block_device(major: int, minor: int) -> dict[str, Any] | None:
    """The whole disk behind a block device number (a partition resolves to its disk)."""
    node = SYS_BLOCK_BY_DEV / f"{major}:{minor}"
    if not node.exists():
        return None
    real = node.resolve()
    partition = None
    disk = real
    if (real / "partition").exists():
        partition = real.name
        disk = real.parent
    disk_dev = _read(disk / "dev") or f"{major}:{minor}"
    sectors = _read(disk / "size")
    rotational = _read(disk / "queue" / "rotational")
    slaves_dir = disk / "slaves"
    return {
        "name": disk.name,
        "major_minor": disk_dev,
        "partition": partition,
        "partition_major_minor": f"{major}:{minor}" if partition else None,
        "size_bytes": int(sectors) * 512 if sectors and sectors.isdigit() else None,
        "rotational": rotational == "1" if rotational is not None else None,
        "model": _read(disk / "device" / "model"),
        # device-mapper / md devices sit on other disks; a throttle goes on the device named here.
        "slaves": sorted(p.name for p in slaves_dir.iterdir()) if slaves_dir.is_dir() else [],
    }


def path_info(path: str) -> dict[str, Any]:
    """Filesystem, mount point and block device (major:minor, the disk a throttle applies to) of `path`."""
    p = Path(path).expanduser()
    if not p.exists():
        raise SizerError(f"{path}: no such file or directory")
    real = os.path.realpath(p)
    st = os.stat(real)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    mount = _mount_of(real, dev)
    info: dict[str, Any] = {
        "path": real,
        "fstype": mount["fstype"] if mount else None,
        "mount_point": mount["mount_point"] if mount else None,
        "mount_source": mount["source"] if mount else None,
        "st_dev": dev,
        "device": None,
    }
    device = block_device(os.major(st.st_dev), os.minor(st.st_dev))
    if device is None and mount and mount["source"].startswith("/dev/"):
        # btrfs, zfs and friends report an anonymous st_dev; their mount source names the device.
        try:
            rdev = os.stat(mount["source"]).st_rdev
            device = block_device(os.major(rdev), os.minor(rdev)) if rdev else None
        except OSError:
            device = None
    info["device"] = device
    if device is None:
        fstype = info["fstype"] or "unknown"
        if fstype in ("tmpfs", "ramfs"):
            info["note"] = f"{fstype} lives in memory: there is no disk under this path"
        elif fstype == "overlay":
            info["note"] = "overlay filesystem (a container layer): no single block device; mount the data from a host volume"
        else:
            info["note"] = f"no block device found behind this path ({fstype}, device {dev})"
    return info


def limits_info() -> dict[str, Any]:
    """The limit backend this host offers and which controllers sizer can write."""
    try:
        info = detect_backend().info()
    except (SizerError, OSError) as exc:
        return {"error": f"limit backend detection failed: {exc}"}
    return {
        "backend": info.name,
        "writable": list(info.writable),
        "root": info.root,
        "placement": info.placement,
        "notes": list(info.notes),
    }


def probe_host(path: str | None = None) -> dict[str, Any]:
    """Everything sizer records about the host a sweep runs on, as JSON-friendly data."""
    target = path_info(path) if path is not None else None  # bad input fails before the slow parts
    uname = platform.uname()
    data: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "os": platform.platform(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "cpu": cpu_info(),
        "memory": memory_info(),
        "gpu": gpu_info(),
        "frameworks": framework_versions(),
        "limits": limits_info(),
    }
    if target is not None:
        data["path"] = target
    return data
