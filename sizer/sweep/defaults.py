"""The default sweep: what a plain `sizer sweep` measures on this host, in how many passes, and
what each point costs in wall time (the dry run's estimate).

On a GPU host (profile gpu) the default answers "how many vCPUs, how much RAM, which disk":
- workloads: `resnet50-train` (JPEG decoding on CPU workers) and its GPU ceiling point. Of the
  examples' workloads it needs the most vCPUs (16 to 21 per H100 or H200), and its 30 shapes in
  two passes fit 30 minutes; every other workload would double the sweep.
- vCPUs (`gpu_vcpu_levels`): 2, doubling while below half the host's threads, then half, three
  quarters and all of them, each rounded down to whole cores; the full count always; and the
  vCPUs per GPU that the target GPU's catalog rows sell (`sold_vcpu_levels`: 24 for p5en.48xlarge,
  28 for a3-ultragpu-8g on an H200) wherever the host has the threads. With `--parallel K`, fewer,
  wider slots where K slots would be too narrow for a sold level (`parallel_grid`).
- RAM (`gpu_ram_levels`): one level that leaves room for a quarter of the dataset beside the
  workload at the largest vCPU count, one that caches all of it with a quarter to spare.
- disks: all three classes.
- passes (`choose_passes`): two, then `--refine 3`, on a virtual machine (whose speed moves by 20%
  within minutes); elsewhere one, raised to two and `--refine 3` when the start calibration's
  repeats spread by more than 10%.
A host without a GPU (profile cpu-small) keeps a small default that finishes in minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sizer.catalog import load_catalog, normalize_gpu
from sizer.shapes import HostCpus, round_up_gib
from sizer.sweep.data import dataset_bytes_estimate
from sizer.units import GIB

CPU_WORKLOADS = ("resnet50-train", "resnet50-infer", "imagenet-preprocess", "ptb-lstm-train")
GPU_WORKLOADS = ("resnet50-train",)
CPU_VCPUS = (1, 2)
CPU_DISKS = ("local-nvme", "standard")
GPU_DISKS = ("local-nvme", "ssd", "standard")

# Memory the worker tree needs besides the cached dataset, at v vCPUs (one loader worker per vCPU):
# 1.5 GiB + 0.19 GiB per vCPU lies above every peak resident size in the examples' stores
# (examples/h200/sizer.sqlite, examples/h100/sizer.sqlite): resnet50-infer 1.53 GiB at 2 vCPUs and
# 4.16 at 16, resnet50-train 1.66 and 3.10.
GPU_FOOTPRINT_GIB = 1.5
GPU_FOOTPRINT_PER_VCPU_GIB = 0.19
# The profile without a GPU: one RAM level that caches its small dataset beside 3 GiB.
CPU_FOOTPRINT_GIB = 3.0

VM_PASSES = 2
VM_REFINE = 3
START_SPREAD_LIMIT = 0.10  # the start calibration's repeats spread more: the host moves, measure twice

# The host's speed over a sweep (sizer.sweep.timeline): each entry runs the calibration REPEATS
# times in one worker, each with REPEAT_BUDGET_S, at the start of a run, after every INTERVAL_S of
# measuring and at the end.
REPEATS = 3
REPEAT_BUDGET_S = 2.0
INTERVAL_S = 600.0
# A calibration worker's wall time besides its window: the examples' calibrations stopped at a third
# of their 20 s budget (6.7 s) and took 14.3 s (examples/h200/sizer.sqlite, sweeps 5 and 9).
CALIBRATION_START_S = 7.6

# What a point costs besides its budget on a GPU host (worker start, eviction, limit group, store,
# the pause before the next point): a sweep's wall time over its measurements, the last line of
# `python lab/benchmarks/sweep_cost.py --store STORE --sweep ID` ("s a measurement"), less its --budget
# (docs/PERFORMANCE.md, "Sweep cost").
GPU_POINT_OVERHEAD_S = {
    # lab/replicates/h100/resnet50-train-2.sqlite: 57 in 22.2 min at --budget 10, 23.3 s each;
    # the slowest of the four resnet50-train sweeps with the faster worker start (H200: 17.9, 20.1
    # and 20.9 s), so that the estimate holds on an H100 and an H200.
    "resnet50-train": 13.3,
    # examples/h200/sizer.sqlite, sweep 10: 34 in 12.1 min at --budget 10 (21.4 s).
    "resnet50-train:decode=gpu": 11.4,
    # sweep 8: 81 in 27.2 min at --budget 9 (20.1 s).
    "resnet50-infer": 11.1,
    # sweep 5: 85 in 21.9 min at --budget 12 (15.5 s).
    "imagenet-preprocess": 3.5,
    # sweep 4: 90 in 29.0 min at --budget 10 (19.3 s).
    "ptb-lstm-train": 9.3,
}
# Elsewhere: the worker's start by framework, and a second for eviction and the limit group.
STARTUP_S = {"pytorch": 8.0, "mxnet": 6.0, "pillow": 3.0, "python": 1.0}
DEFAULT_STARTUP_S = 8.0


# ---------------------------------------------------------------- the grid
def default_workloads(profile: str) -> tuple[str, ...]:
    return GPU_WORKLOADS if profile == "gpu" else CPU_WORKLOADS


def default_disks(profile: str) -> tuple[str, ...]:
    return GPU_DISKS if profile == "gpu" else CPU_DISKS


def gpu_vcpu_levels(cpus: HostCpus) -> list[int]:
    """2, 4, ... doubling while below half the threads; then half, three quarters and all of them,
    rounded down to whole cores (a shape takes whole SMT sibling sets); the full count always.
    16 threads: 2, 4, 8, 12, 16. 32: 2, 4, 8, 16, 24, 32. 12 with SMT: 2, 4, 6, 8, 12."""
    threads = cpus.threads
    per_core = max((len(core) for core in cpus.cores), default=1)
    levels = {threads}
    level = 2
    while level < threads / 2:
        levels.add(level)
        level *= 2
    for quarters in (2, 3):
        levels.add(threads * quarters // 4 // per_core * per_core)
    return sorted(v for v in levels if v >= min(2, threads))


def sold_vcpu_levels(gpu: str | None, catalog_files: tuple = ()) -> list[int]:
    """The vCPUs per GPU that the catalog rows of `gpu` sell (vcpus / gpu_count, whole vCPUs): the
    shapes a buyer chooses between, which the grid measures where the host has the threads."""
    if not gpu:
        return []
    rows = load_catalog(tuple(catalog_files), gpu=normalize_gpu(gpu))
    return sorted({int(r.vcpus // max(r.gpu_count, 1)) for r in rows if r.vcpus >= max(r.gpu_count, 1)})


def default_vcpu_levels(profile: str, cpus: HostCpus, sold: list[int] | None = None) -> list[int]:
    """The grid's vCPU levels (see the module); `sold`: the target GPU's sold levels, measured where
    the host has the threads (on a GPU host only: the profile without a GPU sizes nothing)."""
    if profile == "gpu":
        return sorted(set(gpu_vcpu_levels(cpus)) | {v for v in sold or () if 1 <= v <= cpus.threads})
    return [v for v in CPU_VCPUS if v <= cpus.threads] or [cpus.threads]


@dataclass(frozen=True)
class ParallelGrid:
    """A parallel sweep's default grid: how many slots, the vCPU levels one slot holds, and why it
    took fewer slots than asked (empty: it did not)."""

    slots: int
    levels: list[int]
    note: str = ""


def slot_cpus(cpus: HostCpus, slots: int) -> HostCpus:
    """What one of `slots` equal slots holds of the host's cores (whole cores, as placement splits them)."""
    each = max(1, len(cpus.cores) // max(slots, 1))
    return HostCpus(cpus.cores[:each])


def parallel_grid(cpus: HostCpus, requested: int, sold: list[int]) -> ParallelGrid:
    """`--parallel K` with the default vCPU levels: the most slots up to K that hold the largest sold
    level the host has the threads for (fewer, wider slots rather than slots too narrow for the
    shapes that are sold), and the levels of one such slot."""
    reachable = [v for v in sold if v <= cpus.threads]
    count = max(1, requested)
    while count > 1 and reachable and slot_cpus(cpus, count).threads < max(reachable):
        count -= 1
    slot = slot_cpus(cpus, count)
    levels = default_vcpu_levels("gpu", slot, sold)
    note = ""
    if count < requested:
        narrow = slot_cpus(cpus, requested).threads
        note = (f"--parallel {requested} would give each slot {narrow} threads, too few for the {max(reachable)} vCPUs "
                f"per GPU that are sold: {count} slot(s) of {slot.threads} threads instead")
    return ParallelGrid(count, levels, note)


def _room_gib(host_ram: int) -> float:
    """The largest RAM level the host can give: its RAM less 1 GiB, in half GiB."""
    return math.floor(max(host_ram - GIB, GIB // 2) / GIB * 2) / 2


def gpu_footprint_gib(vcpus: int) -> float:
    return GPU_FOOTPRINT_GIB + GPU_FOOTPRINT_PER_VCPU_GIB * vcpus


def gpu_ram_levels(dataset_bytes: int, largest_vcpus: int, host_ram: int) -> list[float]:
    """Two levels around the dataset beside the workload at the plan's largest vCPU count: one with
    room for a quarter of it (the page cache cannot hold it), one that caches it all with a quarter
    to spare; each within the host's RAM. A dataset of unknown size gives the footprint alone."""
    footprint = gpu_footprint_gib(largest_vcpus) * GIB
    wanted = {round_up_gib(footprint + share * dataset_bytes) for share in (0.25, 1.25)}
    return sorted({min(level, _room_gib(host_ram)) for level in wanted})


def default_ram_levels(profile: str, datasets: list[str], largest_vcpus: int, host_ram: int) -> list[float]:
    biggest = max([dataset_bytes_estimate(d, profile) for d in datasets] or [0])
    if profile == "gpu":
        return gpu_ram_levels(biggest, largest_vcpus, host_ram)
    return [min(round_up_gib(CPU_FOOTPRINT_GIB * GIB + 1.25 * biggest), _room_gib(host_ram))]


# ---------------------------------------------------------------- passes
@dataclass(frozen=True)
class Passes:
    """How often the plan measures each shape, and why. `on_spread`: the (passes, refine) the plan
    takes when the sweep's start calibration spreads by more than START_SPREAD_LIMIT."""

    passes: int
    refine: int
    reason: str = ""
    on_spread: tuple[int, int] | None = None


def choose_passes(passes: int | None, refine: int | None, profile: str, hypervisor: str | None) -> Passes:
    """Given options stand. On a GPU host the passes left open follow the host: two and refine 3
    on a virtual machine; one elsewhere, two and refine 3 if the start calibration spreads. The
    profile without a GPU measures once: it shows the method in minutes."""
    if passes is not None or profile != "gpu":
        return Passes(1 if passes is None else passes, refine or 0)
    if hypervisor:
        return Passes(VM_PASSES, VM_REFINE if refine is None else refine, f"a virtual machine ({hypervisor})")
    return Passes(1, refine or 0, f"{VM_PASSES} if the start calibration spreads by more than {START_SPREAD_LIMIT:.0%}",
                  on_spread=(VM_PASSES, VM_REFINE if refine is None else refine))


# ---------------------------------------------------------------- costs
def point_overhead_s(profile: str, workload: str, config: dict[str, Any], framework: str) -> float:
    """Seconds a point takes besides its budget: the measured figure of its workload on a GPU
    host, else its framework's start and a second for eviction and the limit group."""
    if profile == "gpu":
        variant = f"{workload}:decode={config['decode']}" if config.get("decode", "cpu") != "cpu" else workload
        if variant in GPU_POINT_OVERHEAD_S:
            return GPU_POINT_OVERHEAD_S[variant]
    return STARTUP_S.get(framework, DEFAULT_STARTUP_S) + 1.0


def host_speed_entry_s() -> float:
    """One entry of the host's speed timeline: a calibration worker running its repeats."""
    return CALIBRATION_START_S + REPEATS * REPEAT_BUDGET_S


def calibration_s(points_s: float, loaded_budget_s: float | None) -> float:
    """The calibration of a sweep whose points take `points_s`: the start (the repeats, and with
    more than one vCPU in the plan the loaded rate), an entry every INTERVAL_S, one at the end."""
    during = math.floor(points_s / INTERVAL_S) if INTERVAL_S > 0 else 0
    loaded = CALIBRATION_START_S + loaded_budget_s if loaded_budget_s else 0.0
    return (2 + during) * host_speed_entry_s() + loaded
