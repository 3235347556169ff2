"""Measurements outrank the model: the shapes a fit measured, and the figure an instance shape gets
from them.

An instance with at least the vCPUs and RAM of a measured shape, and a disk at least as fast (read
bandwidth and IOPS, per GPU), runs at least as fast as that shape did: it can run as the smaller
shape, with as many loader workers, as much page cache and the same reads. So an instance shape's
measured figure is the best median among the measured shapes it contains: at a measured shape its
own, between two measured vCPU counts the lower count's. Beyond the largest measured vCPU count the
measurements give only a floor; below the smallest, or with less RAM than any measured shape, none.

A job that reads its samples again, on an instance whose page cache holds the whole dataset
(`WorkloadFit.holds_dataset`), reads nothing from its disk past the first pass: every later sample
comes from memory, which no disk outruns. Its disk then counts as at least as fast as any measured
one, as the model's miss(m) = 0 says; the slower first pass is outside every figure, measured or
predicted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sizer.model.types import WorkloadFit

_RAM_ROUNDING = 1e-6  # GiB: a share of 31.9999999 GiB holds a 32 GiB shape


@dataclass(frozen=True)
class MeasuredShape:
    """One measured shape of a fit: its figure (the median of its passes), every usable measurement
    of it, the sub-window spread of the measurement that stands for it, and what the model predicts
    for it as it was measured."""

    vcpus: int
    ram_gib: float
    disk_class: str
    median: float
    rates: tuple[float, ...]
    spread: float
    model: float
    bottleneck: str = ""  # what the measurement itself saw binding (Point.bottleneck)

    @property
    def label(self) -> str:
        return f"{self.vcpus} vCPU / {self.ram_gib:g} GiB / {self.disk_class}"

    def disagreement(self) -> float:
        """The model's prediction against the measurement, relative to the measurement (+0.1: 10% above)."""
        return (self.model - self.median) / self.median


def measured_shapes(fit: WorkloadFit) -> list[MeasuredShape]:
    """Each real-input shape the fit was fitted on (one per shape: passes are already combined)."""
    out = []
    for point, predicted in fit.residuals:
        rates = point.pass_rates or None
        out.append(MeasuredShape(point.vcpus, point.ram_gib, point.disk_class, point.throughput,
                                 tuple(float(r) for r in rates) if rates else (point.throughput,),
                                 float(point.spread or 0.0), float(predicted), point.bottleneck or ""))
    return out


@dataclass(frozen=True)
class DiskCaps:
    """What a disk gives one GPU: read MB/s and read IOPS (None: not capped)."""

    mbps: float | None
    iops: float | None

    def at_least(self, other: DiskCaps) -> bool:
        """Whether this disk reads at least as fast as `other` in bandwidth and in IOPS."""
        return _not_below(self.mbps, other.mbps) and _not_below(self.iops, other.iops)


def _not_below(a: float | None, b: float | None) -> bool:
    a_value = math.inf if a is None else a
    b_value = math.inf if b is None else b
    return a_value >= b_value * (1 - 1e-9)


def disk_caps(fit: WorkloadFit, table: dict[str, Any], disk_class: str, gpus: int = 1) -> DiskCaps | None:
    """The caps of a disk class for one of `gpus` GPUs sharing it: the bandwidth the fit gives the
    class (else the table's cap), the table's IOPS; None for a class neither knows."""
    known = table.get(disk_class)
    mbps = fit.disk_mbps(disk_class)
    if mbps is None and known is not None:
        mbps = known.read_mbps
    if known is None and mbps is None and disk_class != "local-nvme":
        return None
    iops = None if known is None else known.read_iops
    share = max(gpus, 1)
    return DiskCaps(None if mbps is None else mbps / share, None if iops is None else iops / share)


@dataclass(frozen=True)
class Evidence:
    """What the measurements say of one instance shape: the measured shapes it contains, the one
    with the best median (`best`, an index into the shapes), and whether the instance has more
    vCPUs than any measured shape (the figure is then a floor)."""

    contained: tuple[int, ...]
    best: int
    figure: float
    beyond: bool


def evidence_for(shapes: list[MeasuredShape], caps: dict[str, DiskCaps | None], vcpus: float, ram_gib: float,
                 disk: DiskCaps | None, disk_class: str, cached: bool = False) -> Evidence | None:
    """The measured evidence for an instance shape with `vcpus`, `ram_gib` and a disk of class
    `disk_class` giving `disk` per GPU (`caps`: each measured class's caps); `cached`: its page cache
    holds the dataset, so its disk is not read past the first pass. None where it contains no
    measured shape."""
    inside = []
    for i, s in enumerate(shapes):
        if s.vcpus > vcpus + 1e-9 or s.ram_gib > ram_gib + _RAM_ROUNDING:
            continue
        shape_caps = caps.get(s.disk_class)
        if cached or (s.disk_class == disk_class and disk == shape_caps):
            inside.append(i)
        elif disk is not None and shape_caps is not None and disk.at_least(shape_caps):
            inside.append(i)
    if not inside:
        return None
    best = max(inside, key=lambda i: (shapes[i].median, shapes[i].vcpus, shapes[i].ram_gib))
    top = max(s.vcpus for s in shapes)
    return Evidence(tuple(inside), best, shapes[best].median, vcpus > top + 1e-9)
