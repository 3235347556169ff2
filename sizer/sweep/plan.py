"""A sweep's plan: its options, the defaults they fall back on, and every check made before any
point runs (workloads and their settings, shapes against the host, disk classes, the data path,
worker interpreters, the time budget). A SizerError names the first problem."""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sizer import cache
from sizer.diskclasses import DiskClass, get_disk_class, load_disk_classes
from sizer.errors import SizerError
from sizer.limits import LimitBackend, block_device_for, detect_backend
from sizer.runner import interpreter_for
from sizer.shapes import (
    MAX_PASSES,
    HostCpus,
    InstanceShape,
    PlannedPoint,
    build_plan,
    check_fits,
    host_cpus,
    host_ram_bytes,
    round_up_gib,
)
from sizer.sweep.data import GENERATED_DATASETS, dataset_bytes_estimate
from sizer.units import GIB
from sizer.variants import Variant
from workloads.protocol import PROFILES, Workload

DEFAULT_WORKLOADS = ("resnet50-train", "resnet50-infer", "imagenet-preprocess", "ptb-lstm-train")
# On a GPU host the training workload also runs with JPEG decoding on the GPU (nvjpeg): the other
# answer to "how many vCPUs does this GPU need".
GPU_EXTRA_WORKLOADS = ("resnet50-train:decode=gpu",)
DEFAULT_VCPUS = (1, 2)
DEFAULT_DISKS = ("local-nvme", "standard")
DEFAULT_OUT = Path("results")
STORE_NAME = "sizer.sqlite"
CALIBRATION_WORKLOAD = "cpu-calibrate"

# Per-point time budgets (Spec.time_budget_s): warm-up and the measured window of a point. The
# default grid on a 2-core host without a GPU (16 points + 2 ceilings + calibration) must finish
# well inside 15 min; on a GPU host a point (with about 12 s to start a PyTorch worker) should take
# under a minute, so a 150-point grid fits a few hours.
TIME_BUDGET_S = {"cpu-small": 12.0, "gpu": 18.0}
CALIBRATION_BUDGET_S = {"cpu-small": 8.0, "gpu": 20.0}
# Seconds a worker needs before its first step (interpreter, framework import, model build).
STARTUP_S = {"pytorch": 8.0, "mxnet": 6.0, "pillow": 3.0, "python": 1.0}
DEFAULT_STARTUP_S = 8.0
# Memory a worker itself needs besides the cached dataset (interpreter, framework, model, loader).
FOOTPRINT_GIB = {"cpu-small": 3.0, "gpu": 24.0}


def default_data_dir() -> Path:
    env = os.environ.get("SIZER_DATA")
    return Path(env) if env else Path.home() / ".cache" / "sizer" / "data"


@dataclass
class SweepOptions:
    workloads: list[str] | None = None
    vcpus: list[int] | None = None
    ram_bytes: list[int] | None = None
    disks: list[str] | None = None
    disk_classes_file: str | None = None
    profile: str = "auto"
    store: Path | None = None
    out_dir: Path | None = DEFAULT_OUT
    data_dir: Path | None = None
    gpu: str | None = None
    resume: bool = False
    dry_run: bool = False
    config: dict[str, Any] = field(default_factory=dict)  # overrides for every point (--set)
    time_budget_s: float | None = None
    calibrate: bool = True
    ceiling: bool = True
    limits: str | None = None  # limit backend: auto, cgroup-v2, cgroup-v1, affinity
    lock_path: Path | None = None
    max_seconds: float | None = None  # start no point that would end past this many seconds (a slice)
    cpu_quota: bool = False  # a CFS quota of the vCPUs on top of the cpuset (a container's CPU limit)
    repeat_spread: float | None = None  # measure a point once more when its windows spread by more
    passes: int = 1  # measurements of every shape, at different moments (shapes.pass_order)
    refine: int = 0  # after the passes, measure once more each workload's N worst-predicted shapes
    command: str = ""
    report: bool = True


@dataclass
class SweepPlan:
    points: list[PlannedPoint]
    profile: str
    data_dir: Path
    store: Path
    out_dir: Path | None
    disk_table: dict[str, DiskClass]
    classes: dict[str, type[Workload]]
    cpus: HostCpus
    host_ram: int
    device: str | None
    backend: LimitBackend
    time_budget_s: float
    config: dict[str, Any]  # the plan's identity (its hash finds the sweep to resume)
    datasets: list[str]
    notes: list[str] = field(default_factory=list)
    cpu_quota: bool = False
    passes: int = 1
    refine: int = 0

    def refine_count(self) -> int:
        """The most measurements `--refine` adds: N per workload entry, at most its grid."""
        grids = Counter((p.workload, str(sorted(p.config.items()))) for p in self.points if not p.ceiling and p.pass_no == 1)
        return sum(min(self.refine, n) for n in grids.values())

    def estimate_point_s(self, point: PlannedPoint) -> float:
        cls = self.classes[point.workload]
        startup = STARTUP_S.get(cls.framework, DEFAULT_STARTUP_S)
        return self.time_budget_s + startup + 1.0  # + eviction and group setup

    def estimate_s(self, calibrate: bool = True) -> float:
        total = sum(self.estimate_point_s(p) for p in self.points)
        if self.refine and self.points:
            total += self.refine_count() * self.estimate_point_s(self.points[-1])
        if calibrate and CALIBRATION_WORKLOAD in self.classes:
            total += CALIBRATION_BUDGET_S.get(self.profile, 10.0) + DEFAULT_STARTUP_S
        return total


# ---------------------------------------------------------------- workloads and profile
def gpu_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no device: all mean no GPU here
        return False


def resolve_profile(profile: str) -> str:
    if profile in ("", "auto"):
        return "gpu" if gpu_present() else "cpu-small"
    if profile not in PROFILES:
        raise SizerError(f"unknown profile {profile!r} (choose from auto, {', '.join(PROFILES)})")
    if profile == "gpu" and not gpu_present():
        raise SizerError("profile gpu needs an NVIDIA GPU, and NVML sees none here (use --profile cpu-small)")
    return profile


def load_workload_classes(names: list[str]) -> dict[str, type[Workload]]:
    from workloads import load_all

    registry = load_all()
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise SizerError(f"unknown workload {unknown[0]!r} (known: {', '.join(sorted(registry))})")
    return {n: registry[n] for n in names}


def parse_workload_entry(entry: str) -> tuple[str, dict[str, Any]]:
    """'resnet50-train' -> ('resnet50-train', {}); 'resnet50-train:decode=gpu[:key=value...]' ->
    ('resnet50-train', {'decode': 'gpu'}): settings of that entry alone, on top of --set."""
    variant = Variant.parse(entry)
    return variant.workload, variant.config


def default_workloads(profile: str) -> tuple[str, ...]:
    return DEFAULT_WORKLOADS + (GPU_EXTRA_WORKLOADS if profile == "gpu" else ())


def _check_variant(name: str, cls: type[Workload], profile: str, variant: dict[str, Any]) -> None:
    known = cls.defaults.get(profile, {})
    unknown = sorted(k for k in variant if k not in known)
    if unknown:
        raise SizerError(f"workload {name} has no setting {unknown[0]!r} (has: {', '.join(sorted(known))})")


def _checked_classes(parsed: list[tuple[str, dict[str, Any]]], profile: str) -> dict[str, type[Workload]]:
    """The workload classes of the entries, each with the profile, its interpreter and the entry's
    settings checked."""
    classes = load_workload_classes(list(dict.fromkeys(name for name, _ in parsed)))
    for name, cls in classes.items():
        if profile not in cls.defaults:
            raise SizerError(f"workload {name} has no profile {profile!r} (has {', '.join(sorted(cls.defaults))})")
        interpreter_for(cls.interpreter)  # a missing MXNet environment is refused now, not mid-sweep
    for name, variant in parsed:
        _check_variant(name, classes[name], profile, variant)
    return classes


# ---------------------------------------------------------------- shapes, data and limits
def _checked_disks(opts: SweepOptions) -> tuple[list[str], dict[str, DiskClass]]:
    """The plan's disk classes, each known to the disk-class table (built-in, or the given file)."""
    disk_table = load_disk_classes(opts.disk_classes_file)
    disks = list(dict.fromkeys(opts.disks or DEFAULT_DISKS))
    for d in disks:
        get_disk_class(d, disk_table)
    return disks, disk_table


def default_ram_gib(profile: str, datasets: list[str], host_ram: int) -> float:
    """One RAM level that holds the largest dataset in the page cache beside the worker's own
    footprint, where the host has that much (else what the host has, less 1 GiB)."""
    biggest = max([dataset_bytes_estimate(d, profile) for d in datasets] or [0])
    wanted = round_up_gib(FOOTPRINT_GIB.get(profile, 3.0) * GIB + 1.25 * biggest)
    room = math.floor(max(host_ram - GIB, GIB // 2) / GIB * 2) / 2
    return min(wanted, room)


def _vcpu_levels(opts: SweepOptions, cpus: HostCpus) -> list[int]:
    if opts.vcpus:
        return sorted(set(opts.vcpus))
    return [v for v in DEFAULT_VCPUS if v <= cpus.threads] or [cpus.threads]


def _ram_levels(opts: SweepOptions, profile: str, datasets: list[str], host_ram: int) -> list[float]:
    if opts.ram_bytes:
        return sorted({round(b / GIB, 4) for b in opts.ram_bytes})
    return [default_ram_gib(profile, datasets, host_ram)]


def _check_shapes_fit(vcpus: list[int], ram_gib: list[float], disks: list[str], cpus: HostCpus, host_ram: int) -> None:
    for v in vcpus:
        for r in ram_gib:
            for d in disks:
                check_fits(InstanceShape(v, r, d), cpus.threads, host_ram)


def _check_data_dir(path: Path) -> Path:
    path = path.expanduser()
    if path.exists():
        if not path.is_dir():
            raise SizerError(f"data path {path} is not a directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise SizerError(f"data path {path} is not readable")
        return path.resolve()
    anchor = path
    while not anchor.exists():
        anchor = anchor.parent
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise SizerError(f"data path {path} does not exist and cannot be created ({anchor} is not writable)")
    return path.resolve()


def _check_given_datasets(datasets: list[str], data_dir: Path) -> None:
    """A workload that reads files it does not generate: they must be there and readable."""
    for kind in datasets:
        if kind not in GENERATED_DATASETS and (not data_dir.is_dir() or not any(cache.dataset_files(data_dir))):
            raise SizerError(f"data path {data_dir} holds no files for the {kind!r} dataset")


def _throttle_device(data_dir: Path, disks: list[str], disk_table: dict[str, DiskClass]) -> str | None:
    """The block device holding the data, which a throttled disk class needs."""
    throttled = [d for d in disks if disk_table[d].throttled]
    device = block_device_for(data_dir)
    if throttled and device is None:
        raise SizerError(
            f"data path {data_dir} is not on a block device (tmpfs or overlay?), so disk class "
            f"{throttled[0]!r} cannot be emulated there: give --data on a real disk"
        )
    return device


def _limit_backend(name: str | None) -> tuple[LimitBackend, list[str]]:
    backend = detect_backend(name)
    notes = []
    if backend.name == "affinity":
        notes.append("limits: CPU affinity only; RAM and disk are not enforced (" + "; ".join(backend.info().notes) + ")")
    return backend, notes


def _time_budget(opts: SweepOptions, profile: str) -> float:
    budget = float(opts.time_budget_s if opts.time_budget_s is not None else TIME_BUDGET_S.get(profile, 30.0))
    if budget <= 0:
        raise SizerError(f"time budget must be positive, got {budget:g}")
    return budget


def _check_refine(opts: SweepOptions) -> None:
    if opts.refine < 0:
        raise SizerError(f"--refine wants 0 (off) or more shapes per workload, got {opts.refine}")
    if opts.refine and opts.passes >= MAX_PASSES:
        raise SizerError(f"--refine measures a pass beyond --passes: give --passes below {MAX_PASSES}, got {opts.passes}")


def _check_repeat_spread(opts: SweepOptions) -> None:
    if opts.repeat_spread is not None and not 0 < opts.repeat_spread < 10:
        raise SizerError(f"--repeat-noisy wants a spread between 0 and 10 (0.2 = 20%), got {opts.repeat_spread:g}")


# ---------------------------------------------------------------- the plan
def _plan_identity(
    opts: SweepOptions, entries: list[str], vcpus: list[int], ram_gib: list[float], disks: list[str], profile: str,
    disk_table: dict[str, DiskClass], budget: float, data_dir: Path,
) -> dict[str, Any]:
    """The plan's config, whose hash finds the sweep to resume. cpu_quota, passes, refine and
    repeat_spread enter it only when set, so a plan that leaves them at their defaults hashes the
    same as one stored without them."""
    config = {
        "workloads": entries,
        "vcpus": vcpus,
        "ram_gib": ram_gib,
        "disks": disks,
        "profile": profile,
        "disk_classes": {d: dataclasses.asdict(disk_table[d]) for d in disks},
        "config": dict(opts.config),
        "time_budget_s": budget,
        "data_dir": str(data_dir),
        "ceiling": bool(opts.ceiling),
    }
    if opts.cpu_quota:
        config["cpu_quota"] = True
    if opts.passes != 1:
        config["passes"] = int(opts.passes)
    if opts.refine:
        config["refine"] = int(opts.refine)
    if opts.repeat_spread is not None:
        config["repeat_spread"] = float(opts.repeat_spread)
    return config


def plan_sweep(opts: SweepOptions) -> SweepPlan:
    """Everything checked, nothing run: the points, the host's CPUs and the limit backend."""
    profile = resolve_profile(opts.profile)
    entries = list(dict.fromkeys(e.strip() for e in (opts.workloads or default_workloads(profile))))
    parsed = [parse_workload_entry(e) for e in entries]
    classes = _checked_classes(parsed, profile)
    disks, disk_table = _checked_disks(opts)
    cpus, host_ram = host_cpus(), host_ram_bytes()
    datasets = sorted({cls.dataset for cls in classes.values() if cls.dataset})
    vcpus = _vcpu_levels(opts, cpus)
    ram_gib = _ram_levels(opts, profile, datasets, host_ram)
    _check_shapes_fit(vcpus, ram_gib, disks, cpus, host_ram)
    data_dir = _check_data_dir(Path(opts.data_dir) if opts.data_dir else default_data_dir())
    _check_given_datasets(datasets, data_dir)
    device = _throttle_device(data_dir, disks, disk_table)
    backend, notes = _limit_backend(opts.limits)
    budget = _time_budget(opts, profile)
    _check_refine(opts)

    pairs = [(n, classes[n].dataset, getattr(classes[n], "inputs", None), variant) for n, variant in parsed]
    points = build_plan(pairs, vcpus, ram_gib, disks, profile, config=opts.config, ceiling=opts.ceiling,
                        passes=opts.passes)
    _check_repeat_spread(opts)
    config = _plan_identity(opts, entries, vcpus, ram_gib, disks, profile, disk_table, budget, data_dir)
    return SweepPlan(
        points=points,
        profile=profile,
        data_dir=data_dir,
        store=Path(opts.store) if opts.store else (Path(opts.out_dir or DEFAULT_OUT) / STORE_NAME),
        out_dir=Path(opts.out_dir) if opts.out_dir else None,
        disk_table=disk_table,
        classes=classes,
        cpus=cpus,
        host_ram=host_ram,
        device=device,
        backend=backend,
        time_budget_s=budget,
        config=config,
        datasets=datasets,
        notes=notes,
        cpu_quota=bool(opts.cpu_quota),
        passes=int(opts.passes),
        refine=int(opts.refine),
    )
