"""What one workload group's points measured directly, before anything is fitted."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from sizer.catalog import LOCAL_NVME
from sizer.diskclasses import DiskClass
from sizer.model.equations import cache_ram
from sizer.model.types import Param
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT


def positive_median(values: Iterable[float | None]) -> float | None:
    """The median of the known, finite, positive values; None when there is none."""
    vals = [float(x) for x in values if x is not None and math.isfinite(float(x)) and float(x) > 0]
    return statistics.median(vals) if vals else None


@dataclass
class GroupMeasurements:
    """One group's usable points and the quantities they measured (None where they did not)."""

    name: str
    unit: str
    usable: list[Point]
    synthetic: list[Point]  # input already on the device: the GPU's own ceiling
    real: list[Point]
    gpu_ceiling: float | None
    bytes_per_sample: float | None
    footprint_gib: float | None
    dataset_gib: float | None
    calibration_ips: float | None
    bandwidth: dict[str, float | None] = field(default_factory=dict)  # read MB/s per disk class, None: unthrottled
    params: dict[str, Param] = field(default_factory=dict)  # the disk bandwidths as parameters
    notes: list[str] = field(default_factory=list)

    def shapes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """vCPUs, page-cache RAM and read MB/s (NaN: unthrottled) of each real-input point."""
        v = np.array([p.vcpus for p in self.real], dtype=float)
        m = np.array([cache_ram(p, self.footprint_gib, self.dataset_gib) for p in self.real], dtype=float)
        bw = np.array([np.nan if self.bandwidth.get(p.disk_class) is None else self.bandwidth[p.disk_class]
                       for p in self.real], dtype=float)
        return v, m, bw

    def throughputs(self) -> np.ndarray:
        return np.array([p.throughput for p in self.real], dtype=float)


def measure_group(name: str, group: list[Point], disk_classes: dict[str, DiskClass],
                  disk_mbps: dict[str, float]) -> GroupMeasurements | None:
    """The measurements of a group; None when none of its points is usable."""
    usable = [p for p in group if p.usable]
    if not usable:
        return None
    real = [p for p in usable if p.input != SYNTHETIC_INPUT]
    synthetic = [p for p in usable if p.input == SYNTHETIC_INPUT]
    out = GroupMeasurements(
        name=name,
        unit=Counter(p.unit for p in usable).most_common(1)[0][0],
        usable=usable,
        synthetic=synthetic,
        real=real,
        gpu_ceiling=positive_median(p.throughput for p in synthetic),
        bytes_per_sample=positive_median(p.read_mb_per_sample for p in real),
        footprint_gib=positive_median(p.footprint_gib for p in real),
        dataset_gib=positive_median(p.dataset_gib for p in real),
        calibration_ips=positive_median(p.calibration_ips for p in usable),
    )
    oom = [p for p in group if p.status == "oom" and p.input != SYNTHETIC_INPUT]
    if oom:
        worst = max(p.ram_gib for p in oom)
        if out.footprint_gib is None or worst > out.footprint_gib:
            out.notes.append(f"{len(oom)} shape(s) ran out of memory, up to {worst:g} GiB: footprint at least that")
            out.footprint_gib = worst
    _add_disk_bandwidth(out, disk_classes, disk_mbps)
    return out


def _add_disk_bandwidth(out: GroupMeasurements, disk_classes: dict[str, DiskClass],
                        disk_mbps: dict[str, float]) -> None:
    """Read bandwidth per disk class of the real points: fio's where given, else the class's cap, else
    (unthrottled) the measured device's own; None where nothing bounds the disk."""
    device = _device_mbps(out.real)
    for cls in sorted({p.disk_class for p in out.real}):
        cap = disk_classes[cls].read_mbps if cls in disk_classes else None
        if cls in disk_mbps:
            _set_bandwidth(out, cls, float(disk_mbps[cls]), "fio", "fio-measured read bandwidth")
        elif cap is not None:
            _set_bandwidth(out, cls, float(cap), "disk-class", "read cap of the disk class")
        elif device is not None and (cls in disk_classes or cls == LOCAL_NVME):
            _set_bandwidth(out, cls, device, "fio", "unthrottled: the measured device's own read bandwidth")
        else:
            out.bandwidth[cls] = None
            if cls not in disk_classes and cls != LOCAL_NVME:
                out.notes.append(f"disk class {cls!r} is not in the disk-class table: treated as unthrottled")
    if LOCAL_NVME in out.bandwidth and out.bandwidth[LOCAL_NVME] is None:
        out.notes.append("local-nvme (unthrottled) has no disk bound in the model: no device bandwidth was measured")


def _set_bandwidth(out: GroupMeasurements, cls: str, mbps: float, source: str, note: str) -> None:
    out.bandwidth[cls] = mbps
    out.params[f"disk_{cls}_mbps"] = Param(f"disk_{cls}_mbps", mbps, None, None, "MB/s", source, note=note)


def _device_mbps(points: list[Point]) -> float | None:
    return positive_median(p.device_read_mbps for p in points)
