"""Instance shapes (vCPUs, host RAM, disk class, GPUs), the host's CPUs and GPUs, and the plan of a sweep.

A vCPU is one hardware thread, as clouds sell them. A shape gets whole SMT sibling pairs where the
host has SMT (4 vCPUs = 2 cores x 2 threads), so an emulated shape never shares a core with
something outside it, like the cloud instance it stands for.

A shape's vCPUs and RAM are the whole instance's, whatever its GPU count: a 2-GPU shape of 16
vCPUs runs two processes (one per GPU) in one cpuset of 16, under one memory limit and one disk
throttle.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from sizer.errors import SizerError
from sizer.units import GIB

CPU_SYSFS = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class InstanceShape:
    vcpus: int
    ram_gib: float
    disk_class: str
    gpus: int = 1  # the instance's GPUs: one process per GPU, all in this shape's limits

    def __post_init__(self) -> None:
        if self.vcpus < 1:
            raise SizerError(f"a shape needs at least 1 vCPU, got {self.vcpus}")
        if not self.ram_gib > 0:
            raise SizerError(f"a shape needs RAM above 0, got {self.ram_gib} GiB")
        if self.gpus < 1:
            raise SizerError(f"a shape needs at least 1 GPU, got {self.gpus}")
        if self.vcpus < self.gpus:
            raise SizerError(f"a shape of {self.gpus} GPUs needs at least {self.gpus} vCPUs (one per GPU's "
                             f"process), got {self.vcpus}")

    @property
    def key(self) -> str:
        """Stable identity, used in point keys: '2vcpu-4gib-standard'; with more GPUs than one,
        '16vcpu-64gib-local-nvme-g2' (a one-GPU shape's key never changes, so stores resume)."""
        base = f"{self.vcpus}vcpu-{self.ram_gib:g}gib-{self.disk_class}"
        return base if self.gpus == 1 else f"{base}-g{self.gpus}"

    @property
    def ram_bytes(self) -> int:
        return int(round(self.ram_gib * GIB))

    def label(self) -> str:
        base = f"{self.vcpus} vCPU / {self.ram_gib:g} GiB / {self.disk_class}"
        return base if self.gpus == 1 else f"{base} / {self.gpus} GPUs"

    def as_dict(self) -> dict[str, Any]:
        """The shape as the store keeps it; `gpus` only where it is more than one."""
        shape: dict[str, Any] = {"vcpus": self.vcpus, "ram_gib": self.ram_gib, "disk_class": self.disk_class}
        if self.gpus != 1:
            shape["gpus"] = self.gpus
        return shape


# ---------------------------------------------------------------- the host's CPUs
def parse_cpu_list(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (the kernel's list format)."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


@dataclass(frozen=True)
class HostCpus:
    """The hardware threads sizer may use, grouped into cores (SMT siblings), in placement order."""

    cores: tuple[tuple[int, ...], ...]

    @property
    def threads(self) -> int:
        return sum(len(c) for c in self.cores)

    @property
    def smt(self) -> bool:
        return any(len(c) > 1 for c in self.cores)

    def all(self) -> tuple[int, ...]:
        return tuple(sorted(c for core in self.cores for c in core))


def host_cpus(allowed: Iterable[int] | None = None, sysfs: Path = CPU_SYSFS) -> HostCpus:
    """Cores of the CPUs this process may run on, from sysfs topology (one core per CPU if absent)."""
    allowed_set = set(allowed if allowed is not None else os.sched_getaffinity(0))
    seen: set[int] = set()
    cores: list[tuple[int, tuple[int, ...]]] = []
    for cpu in sorted(allowed_set):
        if cpu in seen:
            continue
        topo = sysfs / f"cpu{cpu}" / "topology"
        try:
            siblings = parse_cpu_list((topo / "thread_siblings_list").read_text())
        except (OSError, ValueError):
            siblings = [cpu]
        try:
            package = int((topo / "physical_package_id").read_text())
        except (OSError, ValueError):
            package = 0
        core = tuple(c for c in siblings if c in allowed_set) or (cpu,)
        seen.update(core)
        cores.append((package, core))
    cores.sort(key=lambda pc: (pc[0], pc[1][0]))
    return HostCpus(cores=tuple(core for _, core in cores))


def select_cpus(vcpus: int, host: HostCpus) -> tuple[int, ...]:
    """The hardware threads a shape of `vcpus` gets: whole cores (sibling pairs) first, taken from
    the end of the host's CPU list, so CPU 0, where the system and sizer itself mostly run, is
    the last one given away and a shape stays on one socket while it fits."""
    if vcpus > host.threads:
        raise SizerError(f"a shape of {vcpus} vCPUs is larger than this host ({host.threads} hardware threads)")
    chosen: list[int] = []
    remaining = vcpus
    partial: tuple[int, ...] | None = None
    for core in reversed(host.cores):
        if remaining == 0:
            break
        if len(core) <= remaining:
            chosen.extend(core)
            remaining -= len(core)
        elif partial is None:
            partial = core  # an odd vCPU on an SMT host: one thread of one more core
    if remaining:
        assert partial is not None
        chosen.extend(partial[:remaining])
    return tuple(sorted(chosen))


# ---------------------------------------------------------------- the host's GPUs
def host_gpu_ids(environ: dict[str, str] | None = None) -> list[str]:
    """The GPUs sizer may give points, as CUDA names them: the entries of the host's
    CUDA_VISIBLE_DEVICES where it is set (a list the host chose), else one index per GPU NVML sees.
    A point's GPU indices are positions in this list (`sizer.runner.gpu_env`)."""
    env = os.environ if environ is None else environ
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [part.strip() for part in listed.split(",") if part.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no device: no GPU here
        return []


def host_ram_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def check_fits(shape: InstanceShape, threads: int, ram_bytes: int) -> None:
    """Refuse a shape the host cannot give (one line, before anything runs)."""
    if shape.vcpus > threads:
        raise SizerError(f"shape {shape.label()} is larger than this host: {shape.vcpus} vCPUs > {threads} hardware threads")
    if shape.ram_bytes > ram_bytes:
        raise SizerError(
            f"shape {shape.label()} is larger than this host: {shape.ram_gib:g} GiB RAM > "
            f"{ram_bytes / GIB:.1f} GiB"
        )


# ---------------------------------------------------------------- the plan
def shape_key(key: str) -> str:
    """A stored point's key without its pass (`#pN`) or its alone mark (`#alone`, `--parallel`'s
    interference check): the key of the shape's first pass."""
    return key.removesuffix("#alone").split("#p")[0]


@dataclass(frozen=True)
class PlannedPoint:
    workload: str
    profile: str
    shape: InstanceShape
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    ceiling: bool = False  # input already in memory (input=synthetic): the rate without CPU decode or disk
    pass_no: int = 1  # which measurement of the shape this is (`sizer sweep --passes`)

    @property
    def key(self) -> str:
        """Stable identity within a sweep: '<workload>/<profile>/<shape key>[/k=v,...][#pN]'."""
        base = f"{self.workload}/{self.profile}/{self.shape.key}"
        if self.config:
            base += "/" + ",".join(f"{k}={self.config[k]}" for k in sorted(self.config))
        return base if self.pass_no == 1 else f"{base}#p{self.pass_no}"

    def label(self) -> str:
        extra = " (ceiling: synthetic input)" if self.ceiling else ""
        listed = ", ".join(f"{k}={self.config[k]}" for k in sorted(self.config))
        settings = "" if self.ceiling or not self.config else f" ({listed})"
        again = f" (pass {self.pass_no})" if self.pass_no > 1 else ""
        return f"{self.workload}{settings} @ {self.shape.label()}{extra}{again}"


def wants_ceiling(workload_name: str, dataset: str, inputs: tuple[str, ...] | None = None) -> bool:
    """Image workloads get one extra point with synthetic input: the rate the model reaches when
    input costs nothing (the X_gpu term of the model). Training workloads accept input=synthetic;
    any other workload gets the point when its class lists "synthetic" among its `inputs`."""
    if dataset != "imagenet":
        return False
    if inputs is not None:
        return "synthetic" in inputs
    return workload_name.endswith("-train")


def build_plan(
    workloads: list[tuple],
    vcpus: list[int],
    ram_gib: list[float],
    disks: list[str],
    profile: str,
    config: dict[str, Any] | None = None,
    ceiling: bool = True,
    passes: int = 1,
    gpus: list[int] | None = None,
    vcpus_per_gpu: bool = False,
) -> list[PlannedPoint]:
    """workloads x shapes (each entry's grid shuffled: see `pass_order`), after one ceiling point
    (input=synthetic at the largest vCPU count and RAM) per image workload that takes synthetic input
    (see `wants_ceiling`). `workloads` holds (name, dataset[, inputs[, variant]]) tuples: `variant`
    is a config override of that entry alone (e.g. {"decode": "gpu"}), on top of `config`. Variants of
    one workload share its ceiling point: input already in memory skips what a variant changes.

    `passes` > 1 measures every shape of an entry that many times, each pass in another order (see
    `pass_order`), so that a host whose speed drifts over minutes does not give one stretch of the
    grid all its slow moments.

    `gpus` (default [1]) adds the GPU count as an axis; `vcpus_per_gpu` reads `vcpus` per GPU, so a
    shape of N GPUs gets N times each level (scaling at fixed vCPUs per GPU). The ceiling point
    stays a one-GPU point."""
    if not workloads or not vcpus or not ram_gib or not disks:
        raise SizerError("empty plan: give at least one workload, vCPU count, RAM size and disk class")
    if not 1 <= passes <= MAX_PASSES:
        raise SizerError(f"--passes wants 1 to {MAX_PASSES} measurements of each shape, got {passes}")
    vcpus = sorted(set(vcpus))
    ram_gib = sorted(set(ram_gib))
    disks = list(dict.fromkeys(disks))
    gpu_counts = sorted(set(gpus or [1]))
    shapes = grid_shapes(vcpus, ram_gib, disks, gpu_counts, vcpus_per_gpu)
    base_config = dict(config or {})
    points: list[PlannedPoint] = []
    with_ceiling: set[str] = set()
    for entry in workloads:
        name, dataset = entry[0], entry[1]
        inputs = entry[2] if len(entry) > 2 else None
        variant = dict(entry[3]) if len(entry) > 3 and entry[3] else {}
        point_config = dict(base_config, **variant)
        # The ceiling first: the shortest point, and the one every other point is judged against,
        # so a sweep cut short still has it.
        if (ceiling and name not in with_ceiling and wants_ceiling(name, dataset, inputs)
                and point_config.get("input") != "synthetic"):
            with_ceiling.add(name)
            disk = "local-nvme" if "local-nvme" in disks else disks[0]
            cfg = dict(base_config, input="synthetic")
            points.append(PlannedPoint(name, profile, InstanceShape(max(vcpus), max(ram_gib), disk), cfg, ceiling=True))
        grid = [PlannedPoint(name, profile, shape, dict(point_config)) for shape in shapes]
        for pass_no in range(1, passes + 1):
            points.extend(dataclasses.replace(p, pass_no=pass_no) for p in pass_order(grid, pass_no))
    keys = [p.key for p in points]
    if len(keys) != len(set(keys)):
        raise SizerError("the plan has duplicate points (a workload listed twice with the same settings?)")
    return points


MAX_PASSES = 9


def grid_shapes(vcpus: list[int], ram_gib: list[float], disks: list[str], gpus: list[int],
                vcpus_per_gpu: bool = False) -> list[InstanceShape]:
    """The grid's shapes: GPU counts, then disks, RAM and vCPUs (one GPU's grid as without the axis).
    `vcpus_per_gpu`: a shape of N GPUs gets N times each vCPU level."""
    gpus = sorted(set(gpus))
    return [InstanceShape(v * g if vcpus_per_gpu else v, ram, disk, g)
            for g in gpus for disk in disks for ram in ram_gib for v in vcpus]


def pass_order(grid: list[PlannedPoint], pass_no: int) -> list[PlannedPoint]:
    """The order of one pass over an entry's grid: the first shuffled, the second that reversed (a
    drift that is linear in time then gives every shape the same mean moment over the two), later
    ones shuffled again; each with a seed of the entry (and the pass), so a resumed sweep keeps its
    order. Not in grid order: that measures each disk class in a stretch of its own, and a host
    whose speed drifts over a sweep then gives one class its slow minutes. Seen on an H200: with
    the SSD and standard disks in the middle of both passes, their CPU-bound shapes decoded an image
    in 3.6-4.2 ms and local NVMe's, at both ends, in 3.1-3.5 (the same work; an SSD shape measured
    near the end, 3.1), and the fit took the disk class for the host's moment."""
    order = list(grid)
    random.Random(f"{grid[0].key}:{1 if pass_no == 2 else pass_no}").shuffle(order)
    return order[::-1] if pass_no == 2 else order


def round_up_gib(nbytes: float, step_gib: float = 0.5) -> float:
    return max(step_gib, math.ceil(nbytes / GIB / step_gib) * step_gib)
