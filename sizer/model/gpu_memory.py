"""A job's GPU memory against its batch size, and the largest batch each card holds.

memory(batch) = fixed + per_sample * batch, fitted by least squares to peaks measured at a few
batch sizes (`sizer gpumem`) or estimated for them (workloads.memory_estimate). `fixed` holds what
does not grow with the batch (weights, gradients, optimizer state, library workspaces; with the
CUDA context where the peaks are the device's), `per_sample` the activations of one sample. A card
of C GiB holds the largest batch whose fitted memory leaves `margin` of the card free (default
10%: room for the allocator's fragmentation and for what the fit does not see). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

GIB = 2**30
DEFAULT_MARGIN = 0.10


@dataclass(frozen=True)
class MemoryFit:
    fixed_bytes: float
    per_sample_bytes: float
    points: tuple[tuple[int, float], ...]  # (batch, peak bytes) fitted to

    def predict(self, batch: float) -> float:
        """Peak bytes at `batch`."""
        return self.fixed_bytes + self.per_sample_bytes * batch

    @property
    def residuals(self) -> list[tuple[int, float, float]]:
        """(batch, measured bytes, relative residual (fitted - measured) / measured) per point."""
        return [(b, m, (self.predict(b) - m) / m) for b, m in self.points]

    @property
    def max_relative_residual(self) -> float:
        return max(abs(r) for _, _, r in self.residuals)

    def largest_batch(self, memory_gib: float, margin: float = DEFAULT_MARGIN) -> int | None:
        """The largest batch whose fitted peak fits in (1 - margin) of a `memory_gib` card; None
        when not even one sample does."""
        usable = usable_bytes(memory_gib, margin)
        batch = math.floor((usable - self.fixed_bytes) / self.per_sample_bytes)
        return batch if batch >= 1 else None

    def memory_needed_gib(self, batch: int, margin: float = DEFAULT_MARGIN) -> float:
        """The smallest card (GiB) that holds `batch` with `margin` of it free."""
        check_margin(margin)
        return self.predict(batch) / (1.0 - margin) / GIB

    def as_dict(self) -> dict[str, object]:
        return {"fixed_bytes": self.fixed_bytes, "per_sample_bytes": self.per_sample_bytes,
                "points": [list(p) for p in self.points],
                "residuals": [{"batch": b, "measured_bytes": m, "relative": r} for b, m, r in self.residuals]}


def check_margin(margin: float) -> None:
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")


def usable_bytes(memory_gib: float, margin: float = DEFAULT_MARGIN) -> float:
    """Bytes of a `memory_gib` card a job may take, `margin` of it kept free."""
    check_margin(margin)
    if memory_gib <= 0:
        raise ValueError(f"card memory must be > 0 GiB, got {memory_gib}")
    return memory_gib * GIB * (1.0 - margin)


def fit_memory(points: Iterable[tuple[int, float]]) -> MemoryFit:
    """Least-squares fit of peak bytes against batch size; needs two distinct batch sizes,
    positive peaks and peaks that grow with the batch. Two points give the line through them."""
    pts = tuple(sorted((int(b), float(m)) for b, m in points))
    if any(b < 1 or m <= 0 for b, m in pts):
        raise ValueError("memory points need batch sizes >= 1 and peaks > 0")
    batches = {b for b, _ in pts}
    if len(batches) < 2:
        raise ValueError("fitting memory against batch size needs at least two batch sizes")
    n = len(pts)
    mean_b = sum(b for b, _ in pts) / n
    mean_m = sum(m for _, m in pts) / n
    sxx = sum((b - mean_b) ** 2 for b, _ in pts)
    sxy = sum((b - mean_b) * (m - mean_m) for b, m in pts)
    slope = sxy / sxx
    if slope <= 0:
        raise ValueError("the peaks do not grow with the batch size: no per-sample memory to fit")
    return MemoryFit(fixed_bytes=mean_m - slope * mean_b, per_sample_bytes=slope, points=pts)


def largest_batches(fit: MemoryFit, memory_sizes_gib: Sequence[float], margin: float = DEFAULT_MARGIN
                    ) -> dict[float, int | None]:
    """`largest_batch` for each card size."""
    return {size: fit.largest_batch(size, margin) for size in sorted(set(memory_sizes_gib))}
