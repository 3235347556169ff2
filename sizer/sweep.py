"""Sweeps: plan workloads x shapes, check everything, then measure point by point under real limits.

Order of work (nothing is measured before every input is known good):
  1. plan and validate: workloads, profiles, shapes against the host, disk classes, data path,
     worker interpreters (a SizerError, exit 2, names the first problem);
  2. take the per-host lock; remove limit groups left by a killed sweep;
  3. probe the host, open the store, start (or resume) the sweep;
  4. prepare datasets once; calibrate one vCPU (cpu-calibrate) once per sweep;
  5. for each point: evict the dataset's pages, create the shape's limit group, run a fresh worker
     in it, remove the group, commit the point at once; with `--refine N`, once the passes are
     stored, fit each workload and measure once more its N shapes the model predicts worst;
  6. write report.html, results.json and points.csv.
Ctrl-C or SIGTERM stop after removing the group in use; committed points stay and `--resume`
continues with the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from sizer import cache
from sizer.diskclasses import DiskClass, get_disk_class, load_disk_classes
from sizer.errors import SizerError
from sizer.limits import DiskThrottle, LimitBackend, LimitRequest, block_device_for, cleanup_leftovers, detect_backend
from sizer.lock import HostLock
from sizer.points import USABLE_STATUSES
from sizer.runner import PointRun, interpreter_for, run_point
from sizer.shapes import (
    HostCpus,
    MAX_PASSES,
    InstanceShape,
    PlannedPoint,
    build_plan,
    check_fits,
    host_cpus,
    host_ram_bytes,
    round_up_gib,
    select_cpus,
)
from sizer.units import GIB, parse_setting
from workloads.protocol import PROFILES, Result, Spec, Workload

DEFAULT_WORKLOADS = ("resnet50-train", "resnet50-infer", "imagenet-preprocess", "ptb-lstm-train")
# On a GPU host the training workload also runs with JPEG decoding on the GPU (nvjpeg): the other
# answer to "how many vCPUs does this GPU need".
GPU_EXTRA_WORKLOADS = ("resnet50-train:decode=gpu",)
DEFAULT_VCPUS = (1, 2)
DEFAULT_DISKS = ("local-nvme", "standard")
DEFAULT_OUT = Path("results")
STORE_NAME = "sizer.sqlite"
CALIBRATION_WORKLOAD = "cpu-calibrate"
GENERATED_DATASETS = ("imagenet", "ptb")

# Per-point time budgets (Spec.time_budget_s): warm-up and the measured window of a point. The
# default grid on a 2-core host without a GPU (16 points + 2 ceilings + calibration) must finish
# well inside 15 min; on a GPU host a point (with about 12 s to start a PyTorch worker) should take
# under a minute, so a 150-point grid fits a few hours.
TIME_BUDGET_S = {"cpu-small": 12.0, "gpu": 18.0}
CALIBRATION_BUDGET_S = {"cpu-small": 8.0, "gpu": 20.0}
# Seconds a worker needs before its first step (interpreter, framework import, model build).
STARTUP_S = {"pytorch": 8.0, "mxnet": 6.0, "pillow": 3.0, "python": 1.0}
DEFAULT_STARTUP_S = 8.0
# Synthetic dataset sizes: many times a loader's prefetch depth, so a cold pass is disk-bound
# for long enough to be measured (see DESIGN, "Measuring a point").
DATASET_IMAGES = {"cpu-small": 2048, "gpu": 50_000}
IMAGE_BYTES_ESTIMATE = 115_000  # the synthetic JPEGs average about 110 KB
PTB_BYTES_ESTIMATE = 6_000_000
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


# ---------------------------------------------------------------- validation and planning
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


def _dataset_bytes_estimate(kind: str, profile: str) -> int:
    if kind == "imagenet":
        return DATASET_IMAGES.get(profile, 2048) * IMAGE_BYTES_ESTIMATE
    if kind == "ptb":
        return PTB_BYTES_ESTIMATE
    return 0


def default_ram_gib(profile: str, datasets: list[str], host_ram: int) -> float:
    """One RAM level that holds the largest dataset in the page cache beside the worker's own
    footprint, where the host has that much (else what the host has, less 1 GiB)."""
    biggest = max([_dataset_bytes_estimate(d, profile) for d in datasets] or [0])
    wanted = round_up_gib(FOOTPRINT_GIB.get(profile, 3.0) * GIB + 1.25 * biggest)
    room = math.floor(max(host_ram - GIB, GIB // 2) / GIB * 2) / 2
    return min(wanted, room)


def parse_workload_entry(entry: str) -> tuple[str, dict[str, Any]]:
    """'resnet50-train' -> ('resnet50-train', {}); 'resnet50-train:decode=gpu[:key=value...]' ->
    ('resnet50-train', {'decode': 'gpu'}): settings of that entry alone, on top of --set."""
    name, *settings = entry.strip().split(":")
    variant = dict(parse_setting(item, f"workload {entry.strip()!r}") for item in settings)
    return name.strip(), variant


def default_workloads(profile: str) -> tuple[str, ...]:
    return DEFAULT_WORKLOADS + (GPU_EXTRA_WORKLOADS if profile == "gpu" else ())


def _check_variant(name: str, cls: type[Workload], profile: str, variant: dict[str, Any]) -> None:
    known = cls.defaults.get(profile, {})
    unknown = sorted(k for k in variant if k not in known)
    if unknown:
        raise SizerError(f"workload {name} has no setting {unknown[0]!r} (has: {', '.join(sorted(known))})")


def plan_sweep(opts: SweepOptions) -> SweepPlan:
    """Everything checked, nothing run: the points, the host's CPUs and the limit backend."""
    profile = resolve_profile(opts.profile)
    entries = list(dict.fromkeys(e.strip() for e in (opts.workloads or default_workloads(profile))))
    parsed = [parse_workload_entry(e) for e in entries]
    names = list(dict.fromkeys(name for name, _ in parsed))
    classes = load_workload_classes(names)
    for name, cls in classes.items():
        if profile not in cls.defaults:
            raise SizerError(f"workload {name} has no profile {profile!r} (has {', '.join(sorted(cls.defaults))})")
        interpreter_for(cls.interpreter)  # a missing MXNet environment is refused now, not mid-sweep
    for name, variant in parsed:
        _check_variant(name, classes[name], profile, variant)
    disk_table = load_disk_classes(opts.disk_classes_file)
    disks = list(dict.fromkeys(opts.disks or DEFAULT_DISKS))
    for d in disks:
        get_disk_class(d, disk_table)

    cpus = host_cpus()
    host_ram = host_ram_bytes()
    if opts.vcpus:
        vcpus = sorted(set(opts.vcpus))
    else:
        vcpus = [v for v in DEFAULT_VCPUS if v <= cpus.threads] or [cpus.threads]
    datasets = sorted({cls.dataset for cls in classes.values() if cls.dataset})
    if opts.ram_bytes:
        ram_gib = sorted({round(b / GIB, 4) for b in opts.ram_bytes})
    else:
        ram_gib = [default_ram_gib(profile, datasets, host_ram)]
    for v in vcpus:
        for r in ram_gib:
            for d in disks:
                check_fits(InstanceShape(v, r, d), cpus.threads, host_ram)

    data_dir = _check_data_dir(Path(opts.data_dir) if opts.data_dir else default_data_dir())
    for kind in datasets:
        if kind not in GENERATED_DATASETS:
            # A workload that reads files it does not generate: they must be there and readable.
            if not data_dir.is_dir() or not any(cache.dataset_files(data_dir)):
                raise SizerError(f"data path {data_dir} holds no files for the {kind!r} dataset")
    throttled = [d for d in disks if disk_table[d].throttled]
    device = block_device_for(data_dir)
    if throttled and device is None:
        raise SizerError(
            f"data path {data_dir} is not on a block device (tmpfs or overlay?), so disk class "
            f"{throttled[0]!r} cannot be emulated there: give --data on a real disk"
        )

    backend = detect_backend(opts.limits)
    notes = []
    info = backend.info()
    if backend.name == "affinity":
        notes.append("limits: CPU affinity only; RAM and disk are not enforced (" + "; ".join(info.notes) + ")")

    budget = float(opts.time_budget_s if opts.time_budget_s is not None else TIME_BUDGET_S.get(profile, 30.0))
    if budget <= 0:
        raise SizerError(f"time budget must be positive, got {budget:g}")
    if opts.refine < 0:
        raise SizerError(f"--refine wants 0 (off) or more shapes per workload, got {opts.refine}")
    if opts.refine and opts.passes >= MAX_PASSES:
        raise SizerError(f"--refine measures a pass beyond --passes: give --passes below {MAX_PASSES}, got {opts.passes}")
    pairs = [(n, classes[n].dataset, getattr(classes[n], "inputs", None), variant) for n, variant in parsed]
    points = build_plan(pairs, vcpus, ram_gib, disks, profile, config=opts.config, ceiling=opts.ceiling,
                        passes=opts.passes)
    store = Path(opts.store) if opts.store else (Path(opts.out_dir or DEFAULT_OUT) / STORE_NAME)
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
    if opts.cpu_quota:  # only when set, so sweeps stored before the option keep their plan's identity
        config["cpu_quota"] = True
    if opts.passes != 1:  # only when set, as above
        config["passes"] = int(opts.passes)
    if opts.refine:
        config["refine"] = int(opts.refine)
    if opts.repeat_spread is not None:
        if not 0 < opts.repeat_spread < 10:
            raise SizerError(f"--repeat-noisy wants a spread between 0 and 10 (0.2 = 20%), got {opts.repeat_spread:g}")
        config["repeat_spread"] = float(opts.repeat_spread)
    return SweepPlan(
        points=points,
        profile=profile,
        data_dir=data_dir,
        store=store,
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


# ---------------------------------------------------------------- datasets
@dataclass
class Dataset:
    kind: str
    path: Path  # what is evicted before each point
    info: dict[str, Any]

    @property
    def nbytes(self) -> int:
        for key in ("bytes", "total_bytes", "size_bytes"):
            if isinstance(self.info.get(key), (int, float)):
                return int(self.info[key])
        return cache.total_bytes(self.path)


def _info_path(info: dict[str, Any], fallback: Path) -> Path:
    for key in ("path", "dir", "root", "data_dir"):
        if info.get(key):
            return Path(info[key])
    return fallback


def _image_count(plan: SweepPlan) -> int:
    counts = [DATASET_IMAGES.get(plan.profile, 2048)]
    for cls in plan.classes.values():
        cfg = cls.defaults.get(plan.profile, {})
        if cls.dataset == "imagenet" and isinstance(cfg.get("dataset_images"), int):
            counts.append(int(cfg["dataset_images"]))
    return max(counts)


def _image_formats(plan: SweepPlan) -> tuple[str, ...]:
    formats = {"files"}
    for p in plan.points:
        cls = plan.classes[p.workload]
        if cls.dataset != "imagenet":
            continue
        cfg = dict(cls.defaults.get(plan.profile, {}))
        cfg.update(p.config)
        fmt = cfg.get("input")
        if isinstance(fmt, str) and fmt not in ("synthetic", "files", ""):
            formats.add(fmt)
    return tuple(sorted(formats))


def dataset_dir(data_root: Path, kind: str) -> Path:
    """Each generated dataset has its own folder under the data root (imagenet/, ptb/); a workload
    reading other files gets the root itself."""
    return data_root / kind if kind in GENERATED_DATASETS else data_root


def prepare_datasets(plan: SweepPlan, kinds: list[str] | None = None) -> dict[str, Dataset]:
    """Generate (or find) each dataset once; returns kind -> Dataset."""
    out: dict[str, Dataset] = {}
    kinds = plan.datasets if kinds is None else kinds
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        where = dataset_dir(plan.data_dir, kind)
        if kind == "imagenet":
            from sizer.datasets import ensure_imagenet

            where.mkdir(exist_ok=True)
            info = ensure_imagenet(where, images=_image_count(plan), seed=0, formats=_image_formats(plan))
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        elif kind == "ptb":
            from sizer.datasets import ensure_ptb

            where.mkdir(exist_ok=True)
            info = ensure_ptb(where)
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        else:
            out[kind] = Dataset(kind, where, {"path": str(where)})
    return out


# ---------------------------------------------------------------- one point
def limit_request(plan: SweepPlan, shape: InstanceShape, label: str, memory: bool = True) -> LimitRequest:
    disk = plan.disk_table[shape.disk_class]
    throttle = None
    if plan.device is not None:
        # Unthrottled classes still name the device, so bytes read from it are counted.
        throttle = DiskThrottle(
            device=plan.device,
            read_bps=disk.read_bps,
            write_bps=disk.write_bps,
            read_iops=disk.read_iops,
            write_iops=disk.write_iops,
        )
    return LimitRequest(
        cpus=select_cpus(shape.vcpus, plan.cpus),
        memory_bytes=shape.ram_bytes if memory else None,
        throttle=throttle,
        label=label,
        cpu_quota=plan.cpu_quota,
    )


def measure_point(
    plan: SweepPlan,
    point: PlannedPoint,
    datasets: dict[str, Dataset],
    *,
    memory_limit: bool = True,
    time_budget_s: float | None = None,
) -> PointRun:
    """Evict the dataset, create the shape's group, run a fresh worker in it, remove the group."""
    cls = plan.classes[point.workload]
    dataset = datasets.get(cls.dataset) if cls.dataset else None
    evicted = cache.evict(dataset.path) if dataset is not None else None
    request = limit_request(plan, point.shape, f"{point.workload}-{point.shape.key}", memory=memory_limit)
    spec = Spec(
        workload=point.workload,
        profile=point.profile,
        vcpus=point.shape.vcpus,
        data_dir=str(dataset.path if dataset is not None else plan.data_dir),
        config=dict(point.config),
        seed=0,
        time_budget_s=float(time_budget_s or plan.time_budget_s),
    )
    try:
        group = plan.backend.create(request)
    except OSError as exc:
        raise SizerError(f"cannot create the limit group for {point.label()}: {exc}") from None
    with group:
        run = run_point(spec, group, interpreter=cls.interpreter, unit=cls.unit, framework=cls.framework,
                        should_stop=STOP.is_set)
    result = run.result
    if not result.config:
        # A worker killed before it answered (oom, timeout) reports no settings: the planned ones
        # keep the point in its workload variant (e.g. decode=gpu) for the fit and the report.
        result.config = {**cls.defaults.get(point.profile, {}), **point.config}
    result.extra.setdefault("shape", point.shape.as_dict())
    result.extra["cpus"] = list(request.cpus)
    if point.pass_no > 1:
        result.extra["pass"] = point.pass_no
    if evicted is not None:
        result.extra["evicted"] = evicted
        result.extra.setdefault("dataset_bytes", dataset.nbytes)  # type: ignore[union-attr]
        result.extra.setdefault("dataset_gib", dataset.nbytes / GIB)  # type: ignore[union-attr]
    disk = plan.disk_table[point.shape.disk_class]
    seconds = result.counters.get("measured_seconds") or 0.0
    read_bytes = result.counters.get("read_bytes") or 0.0
    if disk.read_bps and seconds and result.status in ("ok", "noisy") and read_bytes / seconds >= 0.8 * disk.read_bps:
        # The worker does not know the disk cap; reading at 80% of it or more, the point is disk-bound.
        result.bottleneck = "disk"
    return run


# ---------------------------------------------------------------- signals and progress
class SweepTerminated(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: the group in use is removed and committed points stay."""


# Set by the signal handler as well as raising: Python drops an exception raised while it runs
# certain internal hooks (at fork, say), and the flag still stops the sweep at the next check.
STOP = threading.Event()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the sweep cleanly (in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()
    STOP.clear()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a forked helper (a pool worker) inherited this: die as by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        STOP.set()
        raise SweepTerminated()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def check_stop() -> None:
    if STOP.is_set():
        raise SweepTerminated()


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class SweepProgress:
    """Rich progress bar: point i of N, the current shape, ETA from measured point durations."""

    def __init__(self, total: int, estimate_point_s: float, enabled: bool = True):
        self.total = total
        self.estimate = estimate_point_s
        self.durations: list[float] = []
        self.enabled = enabled
        self._progress = None
        self._task = None

    def __enter__(self) -> "SweepProgress":
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            from sizer.console import err_console

            self._progress = Progress(
                TextColumn("[bold]point[/] {task.fields[index]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                TextColumn("{task.description}"),
                console=err_console,
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("", total=self.total, index="-", eta=self.eta(self.total))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def grow(self, more: int) -> None:
        """Points added after the bar started (`--refine`'s, chosen once the passes are done)."""
        self.total += more
        if self._progress is not None and more:
            self._progress.update(self._task, total=self.total)

    def eta(self, remaining: int) -> str:
        per_point = statistics.mean(self.durations) if self.durations else self.estimate
        return format_duration(per_point * remaining)

    def start(self, index: int, label: str, done: int) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task, completed=done, index=f"{index}/{self.total}", description=label,
                eta=self.eta(self.total - done),
            )

    def finish(self, done: int, seconds: float | None) -> None:
        if seconds is not None:
            self.durations.append(seconds)
        if self._progress is not None:
            self._progress.update(self._task, completed=done, eta=self.eta(self.total - done))

    def note(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text)


# ---------------------------------------------------------------- the sweep
def _host_info(plan: SweepPlan) -> dict[str, Any]:
    try:
        from sizer.probe import probe_host
    except ImportError:
        probe_host = None  # type: ignore[assignment]
    if probe_host is not None:
        info = dict(probe_host(str(plan.data_dir)))
    else:
        import platform
        import socket

        info = {"hostname": socket.gethostname(), "kernel": platform.uname().release}
    cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
    info.setdefault("cpu_model", cpu.get("model", ""))
    info.setdefault("threads", plan.cpus.threads)
    gpu = info.get("gpu") if isinstance(info.get("gpu"), dict) else {}
    info.setdefault("gpus", [d.get("name") for d in gpu.get("devices", [])])
    try:
        info.setdefault("machine_id", Path("/etc/machine-id").read_text().strip() or None)
    except OSError:
        info.setdefault("machine_id", None)
    info["limit_backend"] = plan.backend.name
    info["limit_backend_info"] = dataclasses.asdict(plan.backend.info())
    return info


def calibrate(plan: SweepPlan, datasets: dict[str, Dataset]) -> dict[str, Any]:
    """One vCPU's decode-and-augment rate, so a sweep on this CPU model can be scaled to another."""
    cls = plan.classes.get(CALIBRATION_WORKLOAD)
    if cls is None:
        return {"status": "skipped", "reason": f"workload {CALIBRATION_WORKLOAD} is not installed"}
    shape = InstanceShape(1, plan.host_ram / GIB, "local-nvme" if "local-nvme" in plan.disk_table else next(iter(plan.disk_table)))
    point = PlannedPoint(CALIBRATION_WORKLOAD, plan.profile, shape)
    run = measure_point(plan, point, datasets, memory_limit=False, time_budget_s=CALIBRATION_BUDGET_S.get(plan.profile, 10.0))
    r = run.result
    calibration = {
        "workload": CALIBRATION_WORKLOAD,
        "status": r.status,
        "unit": r.unit,
        "throughput": r.throughput,
        "spread": r.spread,
        "vcpus": 1,
        "cpus": r.extra.get("cpus"),
        "wall_s": round(run.wall_s, 3),
        "error": r.error,
        "method": r.extra.get("method", ""),
    }
    if r.status in ("ok", "noisy") and r.throughput > 0:
        calibration["ips_per_vcpu"] = r.throughput
        busy = max((p.shape.vcpus for p in plan.points), default=1)
        if busy > 1:
            calibration.update(_loaded_calibration(plan, datasets, shape, busy))
    return calibration


def _loaded_calibration(plan: SweepPlan, datasets: dict[str, Dataset], alone: InstanceShape, vcpus: int) -> dict[str, Any]:
    """The same rate with the plan's largest vCPU count all decoding at once (see cpu-calibrate):
    what each vCPU of a loader with one worker per vCPU can give."""
    shape = InstanceShape(vcpus, alone.ram_gib, alone.disk_class)
    point = PlannedPoint(CALIBRATION_WORKLOAD, plan.profile, shape, {"parallel": vcpus})
    run = measure_point(plan, point, datasets, memory_limit=False, time_budget_s=CALIBRATION_BUDGET_S.get(plan.profile, 10.0))
    loaded = run.result.extra.get("rate_per_vcpu_loaded")
    if run.result.status not in ("ok", "noisy") or not isinstance(loaded, (int, float)) or loaded <= 0:
        return {"loaded_status": run.result.status, "loaded_error": run.result.error}
    return {"ips_per_vcpu_loaded": float(loaded), "loaded_vcpus": int(run.result.extra.get("parallel", vcpus)),
            "loaded_spread": run.result.spread}


def _stored_summary(point: PlannedPoint, row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": point.key, "workload": point.workload, **point.shape.as_dict(), "ceiling": point.ceiling, "pass": point.pass_no}
    out.update({"status": row["status"], "throughput": row["throughput"], "unit": row["unit"],
                "spread": row["spread"], "bottleneck": row["bottleneck"], "stored": True,
                "wall_s": round(row["finished"] - row["started"], 2)})
    return out


def _point_summary(point: PlannedPoint, result: Result, wall_s: float | None, skipped: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {"key": point.key, "workload": point.workload, **point.shape.as_dict(), "ceiling": point.ceiling, "pass": point.pass_no}
    row["stored"] = skipped
    row.update(
        {
            "status": result.status,
            "throughput": result.throughput,
            "unit": result.unit,
            "spread": result.spread,
            "bottleneck": result.bottleneck,
            "wall_s": round(wall_s or 0.0, 2),
            "cpu_seconds": result.counters.get("cgroup_cpu_seconds"),
            "read_bytes": result.counters.get("cgroup_read_bytes"),
            "memory_peak_bytes": result.counters.get("cgroup_memory_peak_bytes"),
            "error": result.error.splitlines()[0] if result.error else "",
        }
    )
    return row


def dry_run_summary(plan: SweepPlan, opts: SweepOptions) -> dict[str, Any]:
    return {
        "dry_run": True,
        "profile": plan.profile,
        "points": [
            {"key": p.key, "workload": p.workload, **p.shape.as_dict(), "ceiling": p.ceiling, "pass": p.pass_no,
             "settings": "" if p.ceiling else ", ".join(f"{k}={v}" for k, v in sorted(p.config.items())),
             "estimated_s": round(plan.estimate_point_s(p), 1)}
            for p in plan.points
        ],
        "calibration": opts.calibrate and CALIBRATION_WORKLOAD in plan.classes,
        "estimated_seconds": round(plan.estimate_s(opts.calibrate), 1),
        "estimate_note": "measuring only; generating missing datasets comes on top",
        "refine": {"shapes_per_workload": plan.refine, "at_most": plan.refine_count()} if plan.refine else None,
        "data_dir": str(plan.data_dir),
        "device": plan.device,
        "store": str(plan.store),
        "limit_backend": dataclasses.asdict(plan.backend.info()),
        "time_budget_s": plan.time_budget_s,
        "notes": plan.notes,
    }


def run_sweep(
    opts: SweepOptions,
    progress: bool = True,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Plan, check, then measure every point not yet stored; returns a summary (JSON-friendly)."""
    from sizer.store import Store

    plan = plan_sweep(opts)
    if opts.dry_run:
        return dry_run_summary(plan, opts)
    if opts.calibrate and CALIBRATION_WORKLOAD not in plan.classes:
        try:
            plan.classes.update(load_workload_classes([CALIBRATION_WORKLOAD]))
        except SizerError:
            plan.notes.append(f"no {CALIBRATION_WORKLOAD} workload installed: this sweep has no calibration")

    summary: dict[str, Any] = {"profile": plan.profile, "points": [], "notes": plan.notes}
    started = time.monotonic()
    with HostLock(opts.lock_path), stop_on_signals():
        summary["leftovers_removed"] = cleanup_leftovers()
        plan.data_dir.mkdir(parents=True, exist_ok=True)
        host = _host_info(plan)
        store = Store(plan.store)
        try:
            host_id = store.upsert_host(host)
            sweep_id = store.resumable_sweep(plan.config) if opts.resume else None
            resumed = sweep_id is not None
            if resumed:
                _check_same_host(store, sweep_id, host_id, host, plan.store)
            if sweep_id is None:
                sweep_id = store.start_sweep(host_id, opts.command, plan.config)
            done = store.point_keys(sweep_id)
            summary.update({"sweep_id": sweep_id, "store": str(plan.store), "resumed": resumed})
            if opts.resume and not resumed:
                plan.notes.append("no earlier sweep with this plan in the store: starting a new one")
            todo = [p for p in plan.points if p.key not in done]
            summary["skipped"] = len(plan.points) - len(todo)
            stored = {row["key"]: row for row in store.point_rows(sweep_id)}

            existing = next((s.calibration for s in store.sweeps() if s.id == sweep_id), {})
            need_calibration = opts.calibrate and not existing and CALIBRATION_WORKLOAD in plan.classes
            if need_calibration:
                reused = _calibration_of_host(store, host_id, plan)
                if reused:
                    existing, need_calibration = reused, False
                    store.set_calibration(sweep_id, existing)
                    plan.notes.append(f"calibration taken from sweep {reused['from_sweep']} of this host (same CPUs)")
            kinds = list(plan.datasets)
            if need_calibration and plan.classes[CALIBRATION_WORKLOAD].dataset:
                kinds = sorted(set(kinds) | {plan.classes[CALIBRATION_WORKLOAD].dataset})
            datasets = prepare_datasets(plan, kinds) if (todo or need_calibration) else {}
            summary["datasets"] = {k: {"path": str(d.path), "bytes": d.nbytes} for k, d in datasets.items()}
            if need_calibration:
                existing = calibrate(plan, datasets)
                store.set_calibration(sweep_id, existing)
            summary["calibration"] = existing

            estimate = plan.estimate_point_s(todo[0]) if todo else 0.0
            with SweepProgress(len(plan.points), estimate, enabled=progress) as bar:
                completed = summary["skipped"]
                walls: list[float] = []
                left = 0

                def visit(point: PlannedPoint) -> None:
                    """Measure one point and commit it, or report it as stored, or count it as left."""
                    nonlocal completed, left
                    if point.key in done:
                        summary["points"].append(_stored_summary(point, stored.get(point.key)))
                        return
                    check_stop()
                    if left or _past_deadline(opts.max_seconds, started, walls, plan.estimate_point_s(point)):
                        left += 1
                        return
                    index = completed + 1
                    bar.start(index, point.label(), completed)
                    t0 = time.monotonic()
                    run = measure_point(plan, point, datasets)
                    if (wants_repeat(run.result, opts.repeat_spread)
                            and not _past_deadline(opts.max_seconds, started, [time.monotonic() - t0], 0.0)):
                        bar.note(f"{point.label()}: windows spread {run.result.spread:.0%}, measuring it again")
                        run = keep_steadier(run, measure_point(plan, point, datasets))
                    store.add_point(sweep_id, point.key, point.shape.as_dict(), run.result, run.enforced, run.started)
                    completed += 1
                    elapsed = time.monotonic() - t0
                    walls.append(elapsed)
                    bar.finish(completed, elapsed)
                    row = _point_summary(point, run.result, run.wall_s, skipped=False)
                    summary["points"].append(row)
                    if on_point is not None:
                        on_point(row)
                    if run.result.status not in ("ok", "noisy"):
                        bar.note(f"[yellow]{point.label()}: {run.result.status}[/] {row['error']}")

                for point in plan.points:
                    visit(point)
                if plan.refine and not left:
                    # Chosen from the passes' measurements alone, so a resumed sweep chooses the same.
                    chosen = refine_points(plan, store.results(sweep_id))
                    summary["refine"] = [{"key": point.key, "held_out_error": round(err, 4)} for point, err in chosen]
                    todo_again = [(point, err) for point, err in chosen if point.key not in done]
                    summary["skipped"] += len(chosen) - len(todo_again)
                    completed += len(chosen) - len(todo_again)
                    bar.grow(len(chosen))
                    if todo_again:
                        bar.note("refine: measuring again " + ", ".join(
                            f"{point.label()} (held out {err:.0%})" for point, err in todo_again))
                    for point, _ in chosen:
                        visit(point)
            if left:
                summary["left"] = left
                plan.notes.append(f"stopped at the time limit with {left} point(s) to go: the same command with --resume goes on")
            else:
                store.finish_sweep(sweep_id)
            try:
                summary["outputs"] = _write_outputs(store, sweep_id, opts) if opts.report else {}
            except ImportError as exc:  # the report's own dependencies missing: the points are stored anyway
                summary["outputs"] = {}
                plan.notes.append(f"no report written ({exc}); `sizer report --store {plan.store}` makes it later")
        finally:
            store.close()
    summary["statuses"] = _count_statuses(summary["points"])
    return summary


def wants_repeat(result: Result, spread: float | None) -> bool:
    """A measured point whose windows spread by more than `spread` is measured once more."""
    return spread is not None and result.status in USABLE_STATUSES and result.spread > spread


def keep_steadier(first: PointRun, second: PointRun) -> PointRun:
    """Of two measurements of one point, the one whose windows agree better (a failed second one
    never replaces a measured first); the other's figures go with it under `extra["repeat"]`, so
    nothing measured is dropped unseen. The kept one carries the start of the first, so the point's
    stored time covers both."""
    second_better = second.result.status in USABLE_STATUSES and (
        first.result.status not in USABLE_STATUSES or second.result.spread < first.result.spread)
    kept, other = (second, first) if second_better else (first, second)
    kept.result.extra["repeat"] = {
        "kept": "second" if second_better else "first",
        "other": {"status": other.result.status, "throughput": other.result.throughput,
                  "spread": other.result.spread, "window_rates": other.result.window_rates},
    }
    kept.started = min(first.started, second.started)
    return kept


def refine_points(plan: SweepPlan, results: list[tuple[Any, Result]]) -> list[tuple[PlannedPoint, float]]:
    """`--refine N`: pass K+1 (K: the plan's passes) of each workload's N shapes that its model,
    fitted on the passes without them, predicts worst (`model.worst_predicted`), with that error. A
    shape whose passes ran at a slow or fast moment of a shared host is measured once more, so its
    median moves toward the host's usual speed; what the sweep's other shapes say it should be
    chooses it, not the spread of its own figures (both passes can land on one moment). Only the
    first K passes' measurements choose, so a resumed sweep chooses the same shapes."""
    from sizer.model import worst_predicted
    from sizer.store import point_from_result

    measured = []
    for row, result in results:
        point = point_from_result(row, result)
        if int(point.extra.get("pass", 1)) <= plan.passes:
            point.extra["point_key"] = row["key"]
            measured.append(point)
    if not measured:
        return []
    first_pass = {p.key: p for p in plan.points if p.pass_no == 1 and not p.ceiling}
    chosen = []
    for point, error in worst_predicted(measured, plan.disk_table, plan.refine):
        planned = first_pass.get(point.extra["point_key"].split("#p")[0])
        if planned is not None:
            chosen.append((dataclasses.replace(planned, pass_no=plan.passes + 1), error))
    return chosen


def _past_deadline(max_seconds: float | None, started: float, walls: list[float], estimate: float) -> bool:
    """Would the next point end past the slice's limit? Its length: the longest point so far in
    this run, else the plan's estimate."""
    if max_seconds is None:
        return False
    expected = max(walls) if walls else estimate
    return time.monotonic() - started + expected > max_seconds


def _calibration_of_host(store: Any, host_id: int, plan: SweepPlan) -> dict[str, Any] | None:
    """The newest usable calibration that another sweep of this very host stored, covering this
    plan's largest vCPU count with its loaded figure: the CPUs have not changed, measuring again
    costs half a minute per sweep."""
    busy = max((p.shape.vcpus for p in plan.points), default=1)
    cls = plan.classes.get(CALIBRATION_WORKLOAD)
    if cls is None:
        return None
    from workloads.cpu_calibrate import calibration_method

    current_method = calibration_method(cls.defaults.get(plan.profile, {}))
    for row in reversed(store.sweeps()):
        cal = row.calibration or {}
        if row.host_id != host_id or not cal.get("ips_per_vcpu"):
            continue
        if cal.get("method", "") != current_method:
            continue  # measured another per-image work (an older sizer's float hand-off)
        if busy > 1 and int(cal.get("loaded_vcpus") or 0) < busy:
            continue
        return dict(cal, from_sweep=row.id)
    return None


def _check_same_host(store: Any, sweep_id: int, host_id: int, host: dict[str, Any], path: Path) -> None:
    """A sweep is one host's: points of two machines (even of one kind: their per-vCPU calibrations
    differed by up to 50% on one cloud's GPU hosts) do not belong in one fit."""
    from sizer.store import host_fingerprint

    found = store.sweep_host(sweep_id)
    if found is None or found[0] == host_id or host_fingerprint(found[1]) == host_fingerprint(host):
        return
    then = found[1]
    raise SizerError(
        f"sweep {sweep_id} in {path} was measured on host {then.get('hostname')!r} ({then.get('cpu_model')}), "
        f"this is {host.get('hostname')!r} ({host.get('cpu_model')}): a sweep cannot span two machines; "
        "run without --resume to start a new sweep in this store, or give another --store"
    )


def _count_statuses(rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _write_outputs(store: Any, sweep_id: int, opts: SweepOptions) -> dict[str, str]:
    """report.html, results.json and points.csv of this sweep, where the report module exists."""
    if opts.out_dir is None:
        return {}
    try:
        from sizer.report import write_outputs
    except ImportError:
        return {}
    sweeps = [s for s in store.sweeps() if s.id == sweep_id]
    calibration_ips = None
    if sweeps:
        value = sweeps[0].calibration.get("ips_per_vcpu") if sweeps[0].calibration else None
        calibration_ips = float(value) if isinstance(value, (int, float)) else None
    points = store.points(sweep_id)
    if not points:
        return {}
    for p in points:
        if p.calibration_ips is None:
            p.calibration_ips = calibration_ips
    enforcement = []
    for row in store.point_rows(sweep_id):
        record = json.loads(row["enforced"] or "{}")
        enforcement.append(
            {"workload": row["workload"], "vcpus": row["vcpus"], "ram_gib": row["ram_gib"],
             "disk_class": row["disk_class"], **(record if isinstance(record, dict) else {})}
        )
    paths = write_outputs(points, opts.out_dir, sweeps=sweeps, gpu=opts.gpu, command=opts.command, enforcement=enforcement)
    return {name: str(path) for name, path in (paths or {}).items()}


# ---------------------------------------------------------------- one point on its own
def run_single(
    workload: str,
    vcpus: int,
    ram_bytes: int,
    disk: str,
    *,
    profile: str = "auto",
    data_dir: Path | None = None,
    config: dict[str, Any] | None = None,
    disk_classes_file: str | None = None,
    time_budget_s: float | None = None,
    limits: str | None = None,
    lock_path: Path | None = None,
    cpu_quota: bool = False,
) -> dict[str, Any]:
    """`sizer run`: one point, measured like a sweep's (cold dataset, fresh worker, real limits)."""
    opts = SweepOptions(
        workloads=[workload], vcpus=[vcpus], ram_bytes=[ram_bytes], disks=[disk], profile=profile,
        data_dir=data_dir, config=dict(config or {}), disk_classes_file=disk_classes_file,
        time_budget_s=time_budget_s, ceiling=False, limits=limits, lock_path=lock_path, out_dir=None,
        cpu_quota=cpu_quota,
    )
    plan = plan_sweep(opts)
    point = plan.points[0]
    with HostLock(lock_path), stop_on_signals():
        removed = cleanup_leftovers()
        datasets = prepare_datasets(plan)
        run = measure_point(plan, point, datasets)
    r = run.result
    return {
        "key": point.key,
        "workload": workload,
        **point.shape.as_dict(),
        "profile": plan.profile,
        "status": r.status,
        "throughput": r.throughput,
        "unit": r.unit,
        "spread": r.spread,
        "window_rates": r.window_rates,
        "bottleneck": r.bottleneck,
        "error": r.error,
        "wall_s": round(run.wall_s, 3),
        "cpus": r.extra.get("cpus"),
        "counters": r.counters,
        "limits_seen": r.limits_seen,
        "enforced": run.enforced,
        "leftovers_removed": removed,
        "result": dataclasses.asdict(r),
    }
