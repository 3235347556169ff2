"""The measured point, as the model, the recommender and the report see it, and its CSV form.

`points.csv` has one row per point: `workload,vcpus,ram_gib,disk_class,throughput,unit,status`
plus optional columns (see OPTIONAL_COLUMNS). The same format is written by `sizer report` and read
by `--input`, so measurements from elsewhere can be fitted and recommended from.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.textfiles import open_text
from workloads.protocol import STATUSES, SYNTHETIC_INPUT, UNIT_PATTERN

REQUIRED_COLUMNS = ("workload", "vcpus", "ram_gib", "disk_class", "throughput", "unit", "status")
OPTIONAL_COLUMNS = (
    "profile",
    "spread",
    "bottleneck",
    "gpu_model",
    "gpu_util_pct",
    "cpu_util_per_vcpu",
    "read_mb_per_sample",  # MB read from the device per sample in the cold pass
    "dataset_gib",
    "footprint_gib",
    "calibration_ips",  # per-vCPU decode-and-augment rate of the host (images/s)
    "input",  # files / lmdb / tar / rec / synthetic
    "decode",  # cpu / gpu
    "reads_once",  # true when the job reads each sample once (default: what the workload declares)
    "method",  # the rule the figure follows (workloads.protocol.METHOD_VERSION); empty: unknown
    "gpus",  # the instance's GPUs, one process each (empty: 1); the figure is the whole instance's
    "gpu_mem_util_pct",  # the share of the window the GPU's memory was read or written (NVML)
    "pcie_rx_mbps",  # host-to-device PCIe traffic over the window (NVML), MB/s
    # A pair of jobs on one GPU (`sizer colocate`): each job's point and the same job alone on its half.
    "job",  # the job as run, as its entry names it (resnet50-train:decode=gpu)
    "partner",  # the job beside it on the GPU; empty: alone
    "share_of",  # the instance whose half it ran on, and how its GPU was shared (8vcpu-16gib-local-nvme/time)
)
USABLE_STATUSES = ("ok", "noisy")
# The most vCPUs a point may have: above the largest cloud instances (a few hundred vCPUs), and the
# report's curves and ranges walk every count up to the largest (a point of a million vCPUs took
# minutes to report).
MAX_VCPUS = 4096


@dataclass(frozen=True)
class ParallelMark:
    """Where a point measured beside others ran (`sizer sweep --parallel`): of how many slots, which
    slot, and its GPU (None: a host without one)."""

    slots: int
    slot: int
    gpu: int | None


@dataclass(frozen=True)
class Point:
    """One measured point, or one shape's passes combined (`combine_passes`). The fields after
    `gpus` are what a store knows beside the figure (a points file carries none of them) and what
    combining passes adds; each has a type, none hides in a dictionary."""

    workload: str
    vcpus: int
    ram_gib: float
    disk_class: str
    throughput: float
    unit: str
    status: str = "ok"
    profile: str = ""
    spread: float = 0.0
    bottleneck: str = ""
    gpu_model: str = ""
    gpu_util_pct: float | None = None
    cpu_util_per_vcpu: float | None = None
    read_mb_per_sample: float | None = None
    dataset_gib: float | None = None
    footprint_gib: float | None = None
    calibration_ips: float | None = None
    input: str = ""
    decode: str = ""
    # None: unknown here; the loaders of points add what the registered workload declares (`sizer.facts`).
    reads_once: bool | None = None
    method: int | None = None  # the rule the figure follows (METHOD_VERSION); None: unknown
    gpus: int = 1  # the instance's GPUs; `throughput` is all of them together
    gpu_mem_util_pct: float | None = None  # the share of the window the GPU's memory was busy (NVML)
    pcie_rx_mbps: float | None = None  # host-to-device copies over the PCIe link (NVML), MB/s
    # ---- a pair of jobs on one GPU (`sizer colocate`, docs/design.md, "Two jobs on one GPU"): a point
    # on half of the instance `share_of` ("<shape key>/<time|mps>"), beside `partner` or alone there.
    # Such points stay out of every fit of one job per GPU (`sizer.model.grouping`).
    job: str = ""  # the job as run: its entry (`resnet50-train:decode=gpu`)
    partner: str = ""  # the job it shared the GPU with; empty: alone on its half
    share_of: str = ""
    # ---- from the store
    key: str = ""  # the stored point's key: its shape and pass
    pass_no: int = 1  # the pass of the plan it was measured in (a --refine pass is one past them)
    host_id: int | None = None  # the host of its sweep (the report's section per host)
    epochs: float | None = None  # passes over the data when its window closed (< 1: inside the first, cold)
    cpu_ms_per_sample: float | None = None  # the window's CPU time per sample (`sizer report --cpu-cost`)
    gpu_mem_peak_gib: float | None = None  # the framework's allocator peak: the GPU memory the job needs
    device_read_mbps: float | None = None  # the unthrottled device's own read bandwidth, where measured
    host_probe_mbps: float | None = None  # the host's single-thread speed probe, before and after it (mean)
    # The GPU kernel time by class a profiled point recorded (`sizer.model.gpu_speed`): its GPU's
    # tensor-, memory- and latency-bound shares, from which its speed on other GPUs is predicted.
    kernel_split: Mapping[str, Any] | None = field(default=None, compare=False)
    parallel: ParallelMark | None = None  # measured beside other points (`sizer sweep --parallel`)
    interference_check: str = ""  # the key of the shape it checks, measured both beside others and alone
    real_instance: bool = False  # measured on the whole real instance (`sizer.fleet`), not emulated
    marks: tuple[str, ...] = ()  # what else marks its figure, in words (a short window, a busy host)
    # ---- from combining passes, and from --cpu-cost
    pass_rates: tuple[float, ...] = ()  # every usable measurement of the shape, where more than one
    pass_spread: float | None = None  # their range over their median
    pass_failed: int = 0  # failed measurements of a shape that has a usable one
    speed_scale: float | None = None  # the factor --cpu-cost scaled a CPU-bound figure by

    @property
    def usable(self) -> bool:
        return self.status in USABLE_STATUSES and self.throughput > 0

    @property
    def on_shared_instance(self) -> bool:
        """Measured on half an instance for a pair of jobs, beside its partner or alone there."""
        return bool(self.share_of)

    def shape_label(self) -> str:
        base = f"{self.vcpus} vCPU / {self.ram_gib:g} GiB / {self.disk_class}"
        return base if self.gpus == 1 else f"{base} / {self.gpus} GPUs"

    def to_row(self) -> dict[str, Any]:
        """The point's points.csv columns (None as an empty cell)."""
        return {c: ("" if getattr(self, c) is None else getattr(self, c)) for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS}


_FLOAT_OPTIONAL = {
    "spread",
    "gpu_util_pct",
    "cpu_util_per_vcpu",
    "read_mb_per_sample",
    "dataset_gib",
    "footprint_gib",
    "calibration_ips",
    "gpu_mem_util_pct",
    "pcie_rx_mbps",
}


def unsized_reason(points: Iterable[Point]) -> str | None:
    """Why one workload's points cannot size it, or None when they can. Sizing needs a usable
    measurement with real input: a synthetic-input point measures the GPU alone, not what the CPU,
    the disk and the RAM let through."""
    points = list(points)
    real = [p for p in points if p.input != SYNTHETIC_INPUT]
    if any(p.usable for p in real):
        return None
    if not real:
        return "no measurement with real input (synthetic-input points measure the GPU alone)"
    failed = Counter(p.status if p.status not in USABLE_STATUSES else "no throughput" for p in real)
    counts = ", ".join(f"{status}: {n}" for status, n in failed.most_common())
    ceiling = (", and the synthetic-input ceiling point alone cannot size it"
               if any(p.usable for p in points if p.input == SYNTHETIC_INPUT) else "")
    return f"no usable measurement with real input: its {len(real)} real-input point(s) failed ({counts}){ceiling}"


def repeat_key(p: Point) -> tuple:
    """What makes two points measurements of one thing: the workload as run, the shape, the GPU and
    the host's CPU calibration (points of two hosts stay apart)."""
    return (p.workload, p.profile, p.input, p.decode, p.unit, p.gpu_model, p.calibration_ips, p.reads_once,
            p.vcpus, round(p.ram_gib, 4), p.disk_class, p.gpus, p.job, p.partner, p.share_of)


def combine_passes(points: Iterable[Point]) -> list[Point]:
    """One point per shape where a shape was measured more than once (`sizer sweep --passes`, or
    one shape in several sweeps of a host): the usable measurement with the median rate stands for
    the shape (with an even count, the lower middle one, carrying the median of the two middle
    rates), with every usable rate in `pass_rates` and their range over the median in `pass_spread`.
    A median, not a mean, so one measurement at a slow moment of a shared host does not move the
    shape. Failed measurements of a shape that has a usable one are dropped (their count is kept in
    `pass_failed`); shapes measured once come back unchanged, so combining twice changes nothing."""
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        groups.setdefault(repeat_key(p), []).append(p)
    out: list[Point] = []
    for group in groups.values():
        usable = sorted((p for p in group if p.usable), key=lambda p: p.throughput)
        if len(group) == 1 or not usable:
            out.extend(group)
            continue
        middle = usable[(len(usable) - 1) // 2]
        rates = [p.throughput for p in usable]
        median = statistics.median(rates)
        out.append(dataclasses.replace(middle, throughput=median, pass_rates=tuple(rates),
                                       pass_spread=(rates[-1] - rates[0]) / median,
                                       pass_failed=len(group) - len(usable)))
    return out


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
# The units sizer's workloads report, and a generic one for figures from elsewhere; a figure may also
# carry any other "<what>/s" (UNIT_PATTERN: a user's command job counts in its own unit).
THROUGHPUT_UNITS = ("images/s", "tokens/s", "samples/s", "iterations/s", "MB/s", "MiB/s")


def _flag(text: str, where: str, column: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise SizerError(f"{where}, column {column!r}: not true or false: {text!r}")


def _number(text: str, where: str, column: str, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise SizerError(f"{where}, column {column!r}: not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise SizerError(f"{where}, column {column!r}: must be a finite number >= 0, got {text!r}")
    return value


def _one_of(text: str, where: str, column: str, allowed: Sequence[str], what: str) -> str:
    if text not in allowed:
        raise SizerError(f"{where}, column {column!r}: {text!r} is not {what} (allowed: {', '.join(allowed)})")
    return text


def _unit(text: str, where: str) -> str:
    if text in THROUGHPUT_UNITS or UNIT_PATTERN.fullmatch(text):
        return text
    raise SizerError(f"{where}, column 'unit': {text!r} is not a throughput unit "
                     f"({', '.join(THROUGHPUT_UNITS)}, or another WHAT/s)")


def read_points_csv(path: str | Path, disk_classes: Iterable[str] | None = None,
                    warn: Callable[[str], None] | None = None) -> list[Point]:
    """Parse a points.csv; a malformed file is refused with one line naming the file, the row and
    the column, a file that is no UTF-8 text with one line naming the file. The file is read a row at
    a time and a row repeated verbatim is kept once (`warn` says how many were merged; default: a
    line on stderr), so a file of a million repeated rows takes the memory of one.
    `disk_classes`: the names in force (default: the built-in table)."""
    path = Path(path)
    with open_text(path, "points file") as fh:
        return _points_of(fh, str(path), disk_classes, warn)


def parse_points_csv(text: str, name: str = "points.csv", disk_classes: Iterable[str] | None = None,
                     warn: Callable[[str], None] | None = None) -> list[Point]:
    """Points from a points.csv's text. Each row's disk class must be one of `disk_classes` (default:
    the built-in table), its status one sizer writes and its unit one of THROUGHPUT_UNITS."""
    return _points_of(io.StringIO(text), name, disk_classes, warn)


def _warn_on_stderr(line: str) -> None:
    print(f"sizer: warning: {line}", file=sys.stderr)


def _points_of(lines: Iterable[str], name: str, disk_classes: Iterable[str] | None,
               warn: Callable[[str], None] | None) -> list[Point]:
    """The points of a points.csv's lines, each distinct row once (rows are compared as written)."""
    if disk_classes is None:
        disk_classes = load_disk_classes()
    known_disks = sorted(disk_classes)
    reader = csv.reader(lines)
    header = next(reader, [])
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SizerError(f"{name}: missing column(s) {', '.join(missing)} (needs {','.join(REQUIRED_COLUMNS)})")
    points: list[Point] = []
    seen: set[tuple[str, ...]] = set()
    repeated = 0
    rows = (row for row in reader if row)  # a blank line is no row
    for i, row in enumerate(rows, start=2):  # row 1 is the header
        cells = tuple(row)
        if cells in seen:  # only a new row is parsed, and only new rows are kept
            repeated += 1
            continue
        seen.add(cells)
        if len(row) < len(header):
            raise SizerError(f"{name}: row {i}: {len(row)} cell(s), fewer than the header's {len(header)} columns")
        points.append(_row_point(dict(zip(header, row)), f"{name}: row {i}", known_disks))
    if not points:
        raise SizerError(f"{name}: no points")
    if repeated:
        (warn or _warn_on_stderr)(f"{name}: {repeated} repeated row(s) merged: each distinct row counts once")
    return points


def _row_point(raw: dict[str, Any], where: str, known_disks: list[str]) -> Point:
    if not (raw.get("workload") or "").strip():
        raise SizerError(f"{where}, column 'workload': empty")
    vcpus = int(_number(raw["vcpus"], where, "vcpus", integer=True))
    if not 1 <= vcpus <= MAX_VCPUS:
        raise SizerError(f"{where}, column 'vcpus': must be from 1 to {MAX_VCPUS}, got {vcpus}")
    kwargs: dict[str, Any] = {
        "workload": raw["workload"],
        "vcpus": vcpus,
        "ram_gib": _number(raw["ram_gib"], where, "ram_gib"),
        "disk_class": _one_of(raw["disk_class"] or "local-nvme", where, "disk_class", known_disks,
                              "a known disk class (--disk-classes FILE adds one)"),
        "throughput": _number(raw["throughput"] or "0", where, "throughput"),
        "unit": _unit(raw["unit"] or "", where),
        "status": _one_of(raw["status"] or "ok", where, "status", STATUSES, "a status sizer writes"),
    }
    for col in OPTIONAL_COLUMNS:
        value = raw.get(col)
        if value in (None, ""):
            continue
        if col == "reads_once":
            kwargs[col] = _flag(value, where, col)
        elif col in ("method", "gpus"):
            kwargs[col] = int(_number(value, where, col, integer=True))
        else:
            kwargs[col] = _number(value, where, col) if col in _FLOAT_OPTIONAL else value
    if kwargs.get("gpus", 1) < 1:
        raise SizerError(f"{where}, column 'gpus': must be >= 1")
    return Point(**kwargs)


def write_points_csv(points: Iterable[Point], path: str | Path) -> None:
    columns = list(REQUIRED_COLUMNS) + list(OPTIONAL_COLUMNS)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for p in points:
            writer.writerow(p.to_row())
