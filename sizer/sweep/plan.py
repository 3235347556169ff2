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
from sizer.catalog import load_catalog, normalize_gpu
from sizer.diskclasses import DiskClass, get_disk_class, load_disk_classes
from sizer.errors import SizerError
from sizer.levels import DEFAULT_CONFIDENCE
from sizer.limits import LimitBackend, block_device_for, detect_backend
from sizer.preflight import check_out_folder, check_store_file
from sizer.probe import hypervisor
from sizer.shapes import (
    MAX_PASSES,
    HostCpus,
    InstanceShape,
    PlannedPoint,
    build_plan,
    check_fits,
    grid_shapes,
    host_cpus,
    host_gpu_ids,
    host_ram_bytes,
)
from sizer.sweep import defaults
from sizer.sweep.data import DATASET_IMAGES, GENERATED_DATASETS, DatasetNeeds
from sizer.sweep.dependencies import DependencyCheck, refusal
from sizer.sweep.gpu_share import DEFAULT_SHARING, check_sharing
from sizer.sweep.pairs import PlannedPair, fastest_disk, halve_cpus, pairs_estimate_s, parse_pairs, plan_pairs
from sizer.sweep.strategy import adaptive_passes, check_strategy
from sizer.units import GIB
from sizer.variants import SYNTHETIC_INPUT, Variant
from workloads import load_all
from workloads.protocol import PROFILES, Workload

DEFAULT_OUT = Path("results")
STORE_NAME = "sizer.sqlite"
CALIBRATION_WORKLOAD = "cpu-calibrate"

# Per-point time budgets (Spec.time_budget_s): warm-up and the measured window of a point. The
# default grid on a 2-core host without a GPU (16 points + 2 ceilings + calibration) must finish
# well inside 15 min. On a GPU host, 10 s is the budget of the examples' training sweeps, whose
# windows held 6-7 s of whole loader rounds; the default sweep then fits 30 minutes (defaults.py).
TIME_BUDGET_S = {"cpu-small": 12.0, "gpu": 10.0}
CALIBRATION_BUDGET_S = {"cpu-small": 8.0, "gpu": 20.0}


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
    catalog_files: tuple[Path, ...] = ()  # the report's own catalogs besides the built-in ones (--catalog)
    confidence: float = DEFAULT_CONFIDENCE  # the report's ranges and the level its pick holds at (--confidence)
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
    # Measurements of every shape, at different moments (shapes.pass_order); None: the host decides
    # (defaults.choose_passes).
    passes: int | None = None
    refine: int | None = None  # after the passes, measure once more each workload's N worst-predicted shapes
    command: str = ""
    report: bool = True
    gpus: list[int] | None = None  # GPU counts of the shapes (--gpus); None: one GPU
    vcpus_per_gpu: bool = False  # `vcpus` counts per GPU: a shape of N GPUs gets N times each level
    parallel: int | None = None  # one-GPU points measured at once, each in its slot (--parallel); None: the default
    interference: int | None = None  # shapes a parallel sweep also measures alone (--interference); None: the default
    fleet: Any = None  # sizer.fleet.FleetOptions: measure on the nodes of a Ray cluster (--ray); None: on this host
    strategy: str = "grid"  # "adaptive": shape by shape where the answer can still change (sizer.sweep.adaptive)
    max_points: int | None = None  # an adaptive sweep's most measurements per workload entry; None: no cap
    # Pairs of jobs on one GPU (--colocate A+B, `sizer colocate`): each job on half of the grid's largest
    # shape, beside its partner and alone (sizer.sweep.pairs); how the GPU is shared (--share).
    colocate: list[str] = field(default_factory=list)
    gpu_sharing: str = DEFAULT_SHARING
    pairs_only: bool = False  # `sizer colocate`: the pairs alone, no grid of each job alone
    skip_unavailable: bool = False  # leave out a workload whose modules are missing, instead of refusing the sweep


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
    passes_reason: str = ""  # why the plan measures in this many passes, where the host chose
    # The points, passes and refine the plan takes if its start calibration spreads (apply_start_spread).
    on_spread: tuple[list[PlannedPoint], int, int] | None = None
    pairs: list[PlannedPair] = field(default_factory=list)  # measured after the grid (sizer.sweep.colocate)
    slots: int | None = None  # the slots of `--parallel` the default grid chose (fewer, wider); None: as asked
    sold_vcpus: list[int] = field(default_factory=list)  # the target GPU's sold vCPUs per GPU (defaults.sold_vcpu_levels)
    # Workload entries left out (--skip-unavailable): `dependencies.Unavailable.as_dict` each.
    left_out: list[dict[str, str]] = field(default_factory=list)

    def apply_start_spread(self, spread: float | None) -> bool:
        """Take the plan's points of more passes where the sweep's start calibration spread by more
        than defaults.START_SPREAD_LIMIT; whether the plan changed."""
        if self.on_spread is None or spread is None or spread <= defaults.START_SPREAD_LIMIT:
            return False
        self.points, self.passes, self.refine = self.on_spread
        self.on_spread = None
        self.passes_reason = f"the start calibration spread by {spread:.0%}, over {defaults.START_SPREAD_LIMIT:.0%}"
        return True

    def pair_points(self) -> list[PlannedPoint]:
        """Each pair's jobs, on their halves."""
        return [p for pair in self.pairs for p in pair.halves]

    def dataset_needs(self, kinds: list[str] | None = None) -> DatasetNeeds:
        """What the plan's points read (`kinds`: these datasets only, default all the plan's)."""
        return DatasetNeeds(self.data_dir, tuple(self.datasets if kinds is None else kinds), self._image_count(),
                            self._image_formats())

    def _image_count(self) -> int:
        """The most images any workload of the plan asks for, at least the profile's default."""
        counts = [DATASET_IMAGES.get(self.profile, 2048)]
        for cls in self.classes.values():
            cfg = cls.defaults.get(self.profile, {})
            if cls.dataset == "imagenet" and isinstance(cfg.get("dataset_images"), int):
                counts.append(int(cfg["dataset_images"]))
        return max(counts)

    def _image_formats(self) -> tuple[str, ...]:
        """The image files plus every packed format (lmdb, rec, tar) a point of the plan reads."""
        formats = {"files"}
        for p in self.points + self.pair_points():
            cls = self.classes[p.workload]
            if cls.dataset != "imagenet":
                continue
            cfg = dict(cls.defaults.get(self.profile, {}))
            cfg.update(p.config)
            fmt = cfg.get("input")
            if isinstance(fmt, str) and fmt not in (SYNTHETIC_INPUT, "files", ""):
                formats.add(fmt)
        return tuple(sorted(formats))

    def refine_count(self) -> int:
        """The most measurements `--refine` adds: N per workload entry, at most its grid."""
        grids = Counter((p.workload, str(sorted(p.config.items()))) for p in self.points if not p.ceiling and p.pass_no == 1)
        return sum(min(self.refine, n) for n in grids.values())

    def estimate_point_s(self, point: PlannedPoint) -> float:
        """Its budget and what a point of its workload costs besides (defaults.point_overhead_s)."""
        framework = self.classes[point.workload].framework
        return self.time_budget_s + defaults.point_overhead_s(self.profile, point.workload, point.config, framework)

    def estimate_s(self, calibrate: bool = True) -> float:
        """The points, the most `--refine` adds, and with `calibrate` the calibration and the host's
        speed measured during the sweep."""
        total = sum(self.estimate_point_s(p) for p in self.points) + pairs_estimate_s(self.pairs, self.estimate_point_s)
        if self.refine and self.points:
            total += self.refine_count() * self.estimate_point_s(self.points[-1])
        if calibrate and CALIBRATION_WORKLOAD in self.classes:
            largest = max((p.shape.vcpus for p in self.points + self.pair_points()), default=1)
            budget = CALIBRATION_BUDGET_S.get(self.profile, 10.0)
            total += defaults.calibration_s(total, budget if largest > 1 else None)
            if self.cpus.threads > max(largest, 1):  # and every thread of the host at once (the fingerprint)
                total += defaults.CALIBRATION_START_S + budget
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


def _check_settings(name: str, cls: type[Workload], profile: str, settings: dict[str, Any], source: str = "") -> None:
    """Each setting must be one the workload has, with a value it allows (`Workload.setting_problem`)."""
    known = cls.defaults.get(profile, {})
    for key, value in settings.items():
        if key not in known:
            raise SizerError(f"{source}workload {name} has no setting {key!r} (has: {', '.join(sorted(known))})")
        problem = cls.setting_problem(profile, key, value)
        if problem:
            raise SizerError(f"{source}workload {name}: {problem}")


def _checked_classes(parsed: list[tuple[str, dict[str, Any]]], profile: str,
                     overrides: dict[str, Any]) -> dict[str, type[Workload]]:
    """The workload classes of the entries, each with the profile, the entry's settings and the
    settings of every point (`--set`) checked (its interpreter and modules: `_available`)."""
    classes = load_workload_classes(list(dict.fromkeys(name for name, _ in parsed)))
    for name, cls in classes.items():
        if profile not in cls.defaults:
            raise SizerError(f"workload {name} has no profile {profile!r} (has {', '.join(sorted(cls.defaults))})")
        _check_settings(name, cls, profile, overrides, source="--set: ")
    for name, variant in parsed:
        _check_settings(name, classes[name], profile, variant)
        problem = classes[name].config_problem(profile, {**overrides, **variant})
        if problem:
            raise SizerError(f"workload {name}: {problem}")
    return classes


def _available(entries: list[str], parsed: list[tuple[str, dict[str, Any]]], classes: dict[str, type[Workload]],
               profile: str, overrides: dict[str, Any], skip: bool) -> tuple[list[tuple[str, dict[str, Any]]], list[Any]]:
    """The entries whose modules (in their own interpreter) and datasets' modules are all here, and
    those left out; without `skip`, any left out refuses the plan in one line."""
    check = DependencyCheck(profile)
    kept, left_out = [], []
    for entry, (name, variant) in zip(entries, parsed):
        missing = check.entry(entry, classes[name], {**overrides, **variant})
        if missing is None:
            kept.append((name, variant))
        else:
            left_out.append(missing)
    if left_out and not skip:
        raise SizerError(refusal(left_out))
    if not kept:
        raise SizerError("no workload of the plan can run here: " + "; ".join(u.line() for u in left_out))
    return kept, left_out


# ---------------------------------------------------------------- shapes, data and limits
def _checked_disks(opts: SweepOptions, profile: str) -> tuple[list[str], dict[str, DiskClass]]:
    """The plan's disk classes, each known to the disk-class table (built-in, or the given file)."""
    disk_table = load_disk_classes(opts.disk_classes_file)
    disks = list(dict.fromkeys(opts.disks or defaults.default_disks(profile)))
    for d in disks:
        get_disk_class(d, disk_table)
    return disks, disk_table


def host_gpu_model() -> str | None:
    """The model of this host's first GPU (NVML), None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() < 1:
                return None
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else str(name)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no device: no GPU to name
        return None


def _sold_levels(opts: SweepOptions, profile: str) -> list[int]:
    """The vCPUs per GPU the target GPU's catalog rows sell (--gpu, else this host's GPU), on a GPU host."""
    if profile != "gpu" or opts.vcpus:
        return []
    gpu = opts.gpu or host_gpu_model()
    return defaults.sold_vcpu_levels(normalize_gpu(gpu) if gpu else None, tuple(opts.catalog_files))


def _vcpu_levels(opts: SweepOptions, profile: str, cpus: HostCpus, sold: list[int]) -> tuple[list[int], int | None, list[str]]:
    """The vCPU levels, the slots a parallel sweep takes where the default grid chose them (None: as
    asked), and notes. A default grid with `--parallel K` takes the levels one slot holds."""
    if opts.vcpus:
        return sorted(set(opts.vcpus)), None, []
    notes = []
    unreached = [v for v in sold if v > cpus.threads]
    if unreached:
        notes.append(f"this host has {cpus.threads} threads: the {', '.join(map(str, unreached))} vCPUs per GPU that "
                     "are sold are not measured, so their figures are extrapolated (the report gives their range)")
    if profile == "gpu" and opts.parallel is not None and opts.parallel > 1 and opts.strategy != "adaptive":
        grid = defaults.parallel_grid(cpus, opts.parallel, sold)
        return grid.levels, grid.slots, notes + ([grid.note] if grid.note else [])
    return defaults.default_vcpu_levels(profile, cpus, sold), None, notes


def _ram_levels(opts: SweepOptions, profile: str, datasets: list[str], vcpus: list[int], host_ram: int) -> list[float]:
    if opts.ram_bytes:
        return sorted({round(b / GIB, 4) for b in opts.ram_bytes})
    return defaults.default_ram_levels(profile, datasets, max(vcpus), host_ram)


def _check_shapes_fit(shapes: list[InstanceShape], cpus: HostCpus, host_ram: int) -> None:
    for shape in shapes:
        check_fits(shape, cpus.threads, host_ram)


def _check_gpus(gpus: list[int], profile: str, classes: dict[str, type[Workload]], asked: str | None = None) -> list[str]:
    """GPU counts the host has and the workloads can use (`Workload.multi_gpu`); the notes they
    bring. On the cpu-small profile a shape's GPUs are CPU processes (the gloo backend): a test
    mode of the multi-GPU code for hosts without GPUs, whose figures size nothing. It is taken only
    where the profile was `asked` for by name (None: it was): with the profile the host chose
    ("auto"), more GPUs than the host has are refused."""
    if any(g < 1 for g in gpus):
        raise SizerError(f"--gpus wants GPU counts of 1 or more, got {','.join(map(str, gpus))}")
    most = max(gpus)
    if most == 1:
        return []
    cannot = [name for name, cls in classes.items() if not cls.multi_gpu]
    if cannot:
        raise SizerError(f"workload {cannot[0]} runs on one GPU only: it cannot take --gpus {most}")
    if profile != "gpu" and asked is not None and asked != profile:
        raise SizerError(f"--gpus {most}: this host has no GPU (NVML sees none); --profile cpu-small runs each "
                         "GPU as a CPU process, a test mode of the multi-GPU code whose figures size nothing")
    if profile != "gpu":
        return [f"--gpus {most} on the {profile} profile: each GPU is a CPU process (gloo backend), a test "
                "mode of the multi-GPU code; its figures size nothing"]
    host = host_gpu_ids()
    if most > len(host):
        raise SizerError(f"--gpus {most}: this host has {len(host)} GPU(s) sizer may use")
    return []


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


def _limit_backend(name: str | None, dry_run: bool = False) -> tuple[LimitBackend, list[str]]:
    backend = detect_backend(name, look_only=dry_run)  # a dry run creates no probe group
    notes = []
    if backend.name == "affinity":
        notes.append("limits: CPU affinity only; RAM and disk are not enforced (" + "; ".join(backend.info().notes) + ")")
    return backend, notes


def _time_budget(opts: SweepOptions, profile: str) -> float:
    budget = float(opts.time_budget_s if opts.time_budget_s is not None else TIME_BUDGET_S.get(profile, 30.0))
    if not (math.isfinite(budget) and budget > 0):
        raise SizerError(f"time budget must be a positive number of seconds, got {budget:g}")
    return budget


def check_target_gpu(opts: SweepOptions) -> None:
    """The report's catalogs read, and `--gpu` names a GPU that one of their rows has: a sweep that
    measured everything must not fail at its report."""
    if not opts.gpu and not opts.catalog_files:
        return
    rows = load_catalog(tuple(opts.catalog_files))
    known = sorted({normalize_gpu(r.gpu) for r in rows})
    if opts.gpu and normalize_gpu(opts.gpu) not in known:
        raise SizerError(f"--gpu {opts.gpu!r}: no catalog row has this GPU (known: {', '.join(known)})")


def _check_refine(chosen: defaults.Passes) -> None:
    if chosen.refine < 0:
        raise SizerError(f"--refine wants 0 (off) or more shapes per workload, got {chosen.refine}")
    if chosen.refine and chosen.passes >= MAX_PASSES:
        raise SizerError(f"--refine measures a pass beyond --passes: give --passes below {MAX_PASSES}, got {chosen.passes}")


def _check_repeat_spread(opts: SweepOptions) -> None:
    if opts.repeat_spread is not None and not 0 < opts.repeat_spread < 10:
        raise SizerError(f"--repeat-noisy wants a spread between 0 and 10 (0.2 = 20%), got {opts.repeat_spread:g}")


# ---------------------------------------------------------------- the plan
def _command_jobs(classes: dict[str, type[Workload]], profile: str) -> dict[str, Any]:
    """A user's command job (workloads.command) enters the plan's identity with its settings, the
    command line among them: the same name with another command is another sweep."""
    jobs = {name: dict(cls.defaults.get(profile, {})) for name, cls in classes.items() if cls.origin == "command"}
    return {"command_jobs": jobs} if jobs else {}


def _plan_identity(
    opts: SweepOptions, entries: list[str], vcpus: list[int], ram_gib: list[float], disks: list[str], profile: str,
    disk_table: dict[str, DiskClass], budget: float, data_dir: Path, chosen: defaults.Passes,
) -> dict[str, Any]:
    """The plan's config, whose hash finds the sweep to resume. cpu_quota, passes, refine and
    repeat_spread enter it only when set, so a plan that leaves them at their defaults hashes the
    same as one stored without them. Passes the host chose count as given; passes its start
    calibration will choose are "auto" (the stored calibration chooses again on --resume)."""
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
    if chosen.on_spread is not None:
        config["passes"] = "auto"
    elif chosen.passes != 1:
        config["passes"] = int(chosen.passes)
    if chosen.refine:
        config["refine"] = int(chosen.refine)
    if opts.repeat_spread is not None:
        config["repeat_spread"] = float(opts.repeat_spread)
    if opts.gpus and sorted(set(opts.gpus)) != [1]:
        config["gpus"] = sorted(set(opts.gpus))
    if opts.vcpus_per_gpu:
        config["vcpus_per_gpu"] = True
    if opts.strategy != "grid":  # an adaptive sweep of a grid is not that grid's sweep (--max-points is a budget)

        config["strategy"] = opts.strategy
        config["adaptive_passes"] = adaptive_passes(opts.passes)
    return config


def plan_sweep(opts: SweepOptions) -> SweepPlan:
    """Everything checked, nothing run: the points, the host's CPUs and the limit backend."""
    check_strategy(opts.strategy, opts.max_points, opts.passes, opts.refine, opts.gpus, opts.fleet)
    profile = resolve_profile(opts.profile)
    colocated = parse_pairs(opts.colocate)
    entries = _entries(opts, profile, colocated)
    parsed = [parse_workload_entry(e) for e in entries]
    classes = _checked_classes(parsed, profile, opts.config)
    parsed, left_out = _available(entries, parsed, classes, profile, opts.config, opts.skip_unavailable)
    classes = {name: cls for name, cls in classes.items() if any(name == n for n, _ in parsed)}
    disks, disk_table = _checked_disks(opts, profile)
    check_target_gpu(opts)
    cpus, host_ram = host_cpus(), host_ram_bytes()
    datasets = sorted({cls.dataset for cls in classes.values() if cls.dataset})
    sold = _sold_levels(opts, profile)
    vcpus, slots, level_notes = _vcpu_levels(opts, profile, cpus, sold)
    ram_gib = _ram_levels(opts, profile, datasets, vcpus, host_ram)
    gpu_notes = _check_gpus(opts.gpus or [1], profile, classes, asked=opts.profile)
    _check_shapes_fit(grid_shapes(vcpus, ram_gib, disks, opts.gpus or [1], opts.vcpus_per_gpu), cpus, host_ram)
    data_dir = _check_data_dir(Path(opts.data_dir) if opts.data_dir else default_data_dir())
    _check_given_datasets(datasets, data_dir)
    device = _throttle_device(data_dir, disks, disk_table)
    backend, notes = _limit_backend(opts.limits, opts.dry_run)
    budget = _time_budget(opts, profile)
    vm = hypervisor() if profile == "gpu" and opts.passes is None else None  # only a GPU host's passes follow it
    # An adaptive sweep plans each shape once and measures its passes as it takes it (adaptive_run).
    chosen = (defaults.Passes(1, 0) if opts.strategy == "adaptive" or opts.pairs_only
              else defaults.choose_passes(opts.passes, opts.refine, profile, vm))
    _check_refine(chosen)

    pairs = [(n, classes[n].dataset, getattr(classes[n], "inputs", None), variant) for n, variant in parsed]

    def points_of(passes: int) -> list[PlannedPoint]:
        return build_plan(pairs, vcpus, ram_gib, disks, profile, config=opts.config, ceiling=opts.ceiling, passes=passes,
                          gpus=opts.gpus, vcpus_per_gpu=opts.vcpus_per_gpu)

    points = [] if opts.pairs_only else points_of(chosen.passes)
    notes.extend(gpu_notes + level_notes)
    notes.extend(f"left out (--skip-unavailable): {u.line()}" for u in left_out)
    on_spread = None if chosen.on_spread is None else (points_of(chosen.on_spread[0]), *chosen.on_spread)
    _check_repeat_spread(opts)
    store = Path(opts.store) if opts.store else (Path(opts.out_dir or DEFAULT_OUT) / STORE_NAME)
    if opts.out_dir is not None:  # a sweep's outputs (`sizer run` writes none): before the lock and the probe
        most = len(on_spread[0]) if on_spread else len(points)
        check_out_folder(Path(opts.out_dir), most)
        check_store_file(store, most)
    planned_pairs = _planned_pairs(opts, colocated, profile, vcpus, ram_gib, disks, disk_table, cpus)
    config = _plan_identity(opts, entries, vcpus, ram_gib, disks, profile, disk_table, budget, data_dir, chosen)
    config.update(_command_jobs(classes, profile))
    if planned_pairs:  # a plan without pairs hashes as before
        config["colocate"] = [pair.key for pair in planned_pairs]
        config["pairs_only"] = bool(opts.pairs_only)
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
        passes=chosen.passes,
        refine=chosen.refine,
        passes_reason=chosen.reason,
        on_spread=on_spread,
        pairs=planned_pairs,
        slots=slots,
        sold_vcpus=sold,
        left_out=[u.as_dict() for u in left_out],
    )


def _entries(opts: SweepOptions, profile: str, pairs: list[tuple[str, str]]) -> list[str]:
    """The plan's workload entries: the grid's (--workloads or the default), then each pair's job
    not among them (every job of a pair is sized alone too); with `pairs_only`, the pairs' jobs."""
    if opts.pairs_only and not pairs:
        raise SizerError("give two workloads to measure together on one GPU")
    jobs = list(dict.fromkeys(job for pair in pairs for job in pair))
    if opts.pairs_only:
        return jobs
    grid = list(dict.fromkeys(e.strip() for e in (opts.workloads or defaults.default_workloads(profile))))
    known = {Variant.parse(e).entry for e in grid}
    return grid + [job for job in jobs if job not in known]


def _planned_pairs(opts: SweepOptions, pairs: list[tuple[str, str]], profile: str, vcpus: list[int],
                   ram_gib: list[float], disks: list[str], disk_table: dict[str, DiskClass],
                   cpus: HostCpus) -> list[PlannedPair]:
    """The pairs on halves of the grid's largest one-GPU shape (the most vCPUs and RAM, the fastest
    disk listed), everything checked: the halves, the GPU sharing."""
    if not pairs:
        return []
    check_sharing(opts.gpu_sharing, profile)
    instance = InstanceShape(max(vcpus), max(ram_gib), fastest_disk(disks, disk_table))
    planned = plan_pairs(pairs, instance, opts.gpu_sharing, profile, opts.config)
    halve_cpus(instance.vcpus, cpus)
    return planned
