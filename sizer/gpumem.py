"""`sizer gpumem`'s work: a workload's peak GPU memory over a ladder of batch sizes, measured on
the GPU and estimated without one, fitted against the batch, and the largest batch each card of
the catalogs holds.

Measured: each batch size runs a few steps of the workload's GPU-ceiling point (input already on
the device; the PTB LSTM reads its corpus onto the GPU anyway) in a fresh worker
(sizer.runner.run_point, no limits), which reports the caching allocator's peaks
(`gpu_mem_allocated_peak_bytes`, `gpu_mem_reserved_peak_bytes`, workloads.gpu_memory_use) and
NVML's device figure it samples for every GPU point (`gpu_mem_peak_bytes`: the CUDA context and
the allocator's cache too, what the card must hold). A batch the GPU cannot hold is recorded as
out of memory and left out of the fit.

Estimated: workloads.memory_estimate on fake tensors, on this host's CPU.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from sizer.catalog import InstanceType, normalize_gpu
from sizer.errors import SizerError
from sizer.model.gpu_memory import MemoryFit, fit_memory
from sizer.runner import run_point
from workloads.fake_step import workload_config, workload_kind
from workloads.memory_estimate import estimate
from workloads.protocol import ERROR, SYNTHETIC_INPUT, Spec

MEASURE_BUDGET_S = 3.0  # seconds of steps per batch size: a peak is reached in the first steps
OOM_MARKERS = ("out of memory", "OutOfMemoryError")


@dataclass
class MeasuredPeak:
    batch: int
    status: str  # "ok", "oom" or "error"
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    device_bytes: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.allocated_bytes)


@dataclass
class LadderReport:
    workload: str
    batches: list[int]
    margin: float
    measured: list[MeasuredPeak] | None = None
    measure_note: str = ""
    analytic: list[dict[str, Any]] | None = None
    analytic_note: str = ""
    fits: dict[str, MemoryFit] = field(default_factory=dict)
    cards: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "batches": self.batches, "margin": self.margin,
            "measured": None if self.measured is None else [vars(m) for m in self.measured],
            "measure_note": self.measure_note,
            "analytic": self.analytic, "analytic_note": self.analytic_note,
            "fits": {k: f.as_dict() for k, f in self.fits.items()},
            "cards": self.cards,
        }


def default_batches(own_batch: int) -> list[int]:
    """The workload's own batch and its half, quarter and eighth (each at least 1, no repeats)."""
    return sorted({max(1, round(own_batch / d)) for d in (8, 4, 2, 1)})


def parse_batches(text: str) -> list[int]:
    """"32,64,128" -> [32, 64, 128]; SizerError for anything but two or more distinct sizes >= 1."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise SizerError(f"--batches must be whole numbers separated by commas, got {text!r}") from None
    if any(v < 1 for v in values):
        raise SizerError(f"--batches must be >= 1, got {text!r}")
    if len(values) < 2:
        raise SizerError(f"--batches needs at least two distinct sizes to fit memory against the batch, got {text!r}")
    return values


def check_workload(name: str) -> dict[str, Any]:
    """The workload's gpu-profile config; SizerError for one without a GPU memory recipe."""
    try:
        workload_kind(name)
        return workload_config(name)
    except ValueError as exc:
        raise SizerError(str(exc)) from None


def _peak(batch: int, result: Any) -> MeasuredPeak:
    counters = result.counters or {}
    if result.status == ERROR or not counters.get("gpu_mem_allocated_peak_bytes"):
        text = result.error or "no allocator peak reported"
        status = "oom" if any(m in text for m in OOM_MARKERS) else "error"
        return MeasuredPeak(batch, status, error=text.strip().splitlines()[-1][:300] if text.strip() else "")
    return MeasuredPeak(batch, "ok", int(counters["gpu_mem_allocated_peak_bytes"]),
                        int(counters.get("gpu_mem_reserved_peak_bytes") or 0) or None,
                        int(counters.get("gpu_mem_peak_bytes") or 0) or None)


def measure_ladder(name: str, batches: Sequence[int], config: dict[str, Any], data_dir: Path | None,
                   budget_s: float = MEASURE_BUDGET_S, progress: Callable[[str], None] | None = None) -> list[MeasuredPeak]:
    """Peaks of workload `name` at each batch size, each in a fresh worker on the GPU."""
    synthetic = "input" in config
    vcpus = len(os.sched_getaffinity(0))
    out = []
    for batch in batches:
        overrides: dict[str, Any] = {"batch_size": int(batch)}
        if synthetic:
            overrides["input"] = SYNTHETIC_INPUT
        with tempfile.TemporaryDirectory(prefix="sizer-gpumem-") as work:
            spec = Spec(workload=name, profile="gpu", vcpus=vcpus, data_dir=str(data_dir or ""), work_dir=work,
                        config=overrides, time_budget_s=budget_s)
            run = run_point(spec)
        peak = _peak(int(batch), run.result)
        out.append(peak)
        if progress is not None:
            progress(f"batch {batch}: {peak.status}")
    return out


def analytic_ladder(name: str, batches: Iterable[int]) -> list[dict[str, Any]]:
    """workloads.memory_estimate at each batch size."""
    return [estimate(name, int(b)).as_dict() for b in batches]


def card_sizes(rows: Iterable[InstanceType]) -> dict[float, list[str]]:
    """GPU memory sizes (GiB) the catalogs sell, with the GPU models of each."""
    sizes: dict[float, set[str]] = {}
    for row in rows:
        if row.gpu_memory_gib and row.gpu_memory_gib > 0:
            sizes.setdefault(float(row.gpu_memory_gib), set()).add(normalize_gpu(row.gpu))
    return {size: sorted(gpus) for size, gpus in sorted(sizes.items())}


def fit_ladder(report: LadderReport) -> None:
    """Fit memory(batch) to the measured peaks (allocated, and the device's where NVML gave them)
    and to the analytic estimates; a set of peaks that cannot be fitted is left out."""
    candidates: dict[str, list[tuple[int, float]]] = {}
    if report.measured:
        ok = [m for m in report.measured if m.ok]
        candidates["measured_allocated"] = [(m.batch, float(m.allocated_bytes or 0)) for m in ok]
        if ok and all(m.device_bytes for m in ok):
            candidates["measured_device"] = [(m.batch, float(m.device_bytes or 0)) for m in ok]
    if report.analytic:
        candidates["analytic"] = [(int(a["batch_size"]), float(a["peak_bytes"])) for a in report.analytic]
    for key, points in candidates.items():
        try:
            report.fits[key] = fit_memory(points)
        except ValueError:
            continue


def size_cards(report: LadderReport, sizes: dict[float, list[str]]) -> None:
    """The largest batch per card size, from the device fit (what the card must hold) where
    measured, and from the analytic fit."""
    device = report.fits.get("measured_device") or report.fits.get("measured_allocated")
    analytic = report.fits.get("analytic")
    report.cards = [{
        "memory_gib": size, "gpus": gpus,
        "largest_batch_measured": None if device is None else device.largest_batch(size, report.margin),
        "largest_batch_analytic": None if analytic is None else analytic.largest_batch(size, report.margin),
    } for size, gpus in sizes.items()]
