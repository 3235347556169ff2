"""The load factor: what a busy host takes from each GPU's input pipeline.

A GPU of an instance of N GPUs shares its host with N - 1 other input pipelines: memory bandwidth,
caches and the host's other work. A parallel sweep (`sizer sweep --parallel K`) measures it: its
interference check measures a CPU-bound shape (the largest vCPU level on the fastest disk at the
largest RAM) with every slot busy and, once nothing else runs, alone in the same slot. The load
factor is the median of loaded over alone over such pairs. A pair where either measurement was
capped by its disk or its memory, or the loaded one by the GPU, is left out: it cannot show what
the CPUs lost.

The points of a parallel sweep were themselves measured with the other slots busy: where most of a
fit's CPU-bound one-GPU points were, its figures are loaded already (`fit_loaded`).
Pure: points in, a figure out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT

# A measurement labelled with one of these could not show what the CPUs lost.
_CAPPED = ("disk", "memory")


@dataclass(frozen=True)
class LoadPair:
    """One shape measured with the other slots busy and alone: both rates."""

    key: str
    vcpus: int
    loaded: float
    alone: float
    slots: int

    @property
    def factor(self) -> float:
        return self.loaded / self.alone


@dataclass(frozen=True)
class LoadFactor:
    """A workload variant's load factor (see the module): the CPU-bound pairs, the checks left out
    as capped, the most slots they ran beside, and the share of the fit's CPU-bound one-GPU points
    measured beside other points."""

    pairs: tuple[LoadPair, ...] = ()
    capped: tuple[str, ...] = ()
    slots: int = 1
    loaded_share: float = 0.0

    @property
    def factor(self) -> float | None:
        """The median loaded / alone over the CPU-bound pairs; None without one."""
        return statistics.median(p.factor for p in self.pairs) if self.pairs else None

    @property
    def fit_loaded(self) -> bool:
        """Whether the fit's CPU-bound figures were mostly measured with other slots busy."""
        return self.slots > 1 and self.loaded_share >= 0.5

    def summary(self) -> dict[str, Any] | None:
        """The report's load figures (results.json `load`); None where nothing was measured beside others."""
        if self.slots <= 1 and not self.pairs and not self.capped:
            return None
        return {"factor": self.factor, "slots": self.slots, "fit_loaded": self.fit_loaded,
                "loaded_share": self.loaded_share, "capped_checks": list(self.capped),
                "pairs": [{"key": p.key, "vcpus": p.vcpus, "loaded": p.loaded, "alone": p.alone, "factor": p.factor,
                           "slots": p.slots} for p in self.pairs]}


def _capped(point: Point, loaded: bool) -> bool:
    return point.bottleneck in _CAPPED or (loaded and point.bottleneck == "gpu")


def measure_load(points: Sequence[Point]) -> LoadFactor:
    """The load factor of one workload variant's measurements (each pass on its own, as stored:
    the loaded and the alone measurement of a shape are both there)."""
    checks: dict[str, dict[str, Point]] = {}
    for p in points:
        if p.interference_check and p.usable and p.input != SYNTHETIC_INPUT and p.gpus == 1:
            checks.setdefault(p.interference_check, {})["loaded" if p.parallel else "alone"] = p
    pairs, capped = [], []
    for key in sorted(checks):
        loaded, alone = checks[key].get("loaded"), checks[key].get("alone")
        if loaded is None or alone is None or alone.throughput <= 0:
            continue
        if _capped(loaded, True) or _capped(alone, False):
            capped.append(key)
            continue
        pairs.append(LoadPair(key, loaded.vcpus, loaded.throughput, alone.throughput,
                              loaded.parallel.slots if loaded.parallel else 1))
    cpu_bound = [p for p in points if p.usable and p.input != SYNTHETIC_INPUT and p.gpus == 1 and p.bottleneck == "cpu"]
    beside = [p for p in cpu_bound if p.parallel is not None and p.parallel.slots > 1]
    slots = max((p.parallel.slots for p in points if p.parallel is not None), default=1)
    share = len(beside) / len(cpu_bound) if cpu_bound else 0.0
    return LoadFactor(tuple(pairs), tuple(capped), slots, share)
