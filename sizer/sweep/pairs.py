"""The pairs of a sweep (`sizer colocate A B`, `sizer sweep --colocate A+B`): two jobs on one GPU,
each on half of one instance (docs/design.md, "Two jobs on one GPU").

An instance of V vCPUs, R GiB of RAM and disk class D, with one GPU, is split in two halves:
- vCPUs: the instance's own V hardware threads (whole SMT sibling sets, as `select_cpus` gives a
  shape), halved by whole cores: V/2 each, no core shared between the jobs;
- RAM: R/2 each, a memory limit of each job's own (its page cache included);
- disk: a throttle of each job's own at half of D's read and write bandwidth and IOPS (an
  unthrottled class stays unthrottled: both jobs read the real device);
- the GPU: the same one for both, time-sliced or through MPS (`sizer.sweep.gpu_share`).

Each job is measured beside its partner (`PlannedPair.shared_key`) and alone on its half
(`PlannedPair.alone_key`): the rate r_AB divides. A job alone on a half is measured once per sweep,
whatever pairs it is in. Pure but for `halve_cpus`, which reads nothing either: it takes the host's CPUs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.shapes import HostCpus, InstanceShape, PlannedPoint, select_cpus
from sizer.variants import Variant

JOB_SHARE = 0.5  # each job's share of the instance's vCPUs, RAM and disk class
PAIR_SEPARATOR = "+"


def parse_pairs(items: list[str] | None) -> list[tuple[str, str]]:
    """`--colocate A+B` (repeatable, or pairs separated by commas) as pairs of workload entries, each
    pair in sorted order, each once; a SizerError names a malformed one."""
    pairs: list[tuple[str, str]] = []
    for item in items or []:
        for text in (part.strip() for part in item.split(",")):
            if not text:
                continue
            jobs = [job.strip() for job in text.split(PAIR_SEPARATOR)]
            if len(jobs) != 2 or not all(jobs):
                raise SizerError(f"--colocate {text!r}: give two workloads joined by '+', e.g. "
                                 "resnet50-train+ptb-lstm-train")
            jobs = [Variant.parse(job).entry for job in jobs]  # a malformed entry is refused here
            pair = (min(jobs), max(jobs))
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def half_of(instance: InstanceShape) -> InstanceShape:
    """One job's half of an instance: half its vCPUs and RAM, its disk class (throttled at half)."""
    if instance.gpus != 1:
        raise SizerError(f"a pair shares one GPU: an instance of {instance.gpus} GPUs cannot hold one")
    if instance.vcpus < 2 or instance.vcpus % 2:
        raise SizerError(f"an instance of {instance.vcpus} vCPUs cannot be halved between two jobs: "
                         "give an even vCPU count of 2 or more")
    return InstanceShape(instance.vcpus // 2, instance.ram_gib * JOB_SHARE, instance.disk_class)


def halve_cpus(vcpus: int, host: HostCpus) -> tuple[HostCpus, HostCpus]:
    """The two jobs' CPUs: the hardware threads an instance of `vcpus` gets on this host, split by
    whole cores into two halves of `vcpus` / 2 threads each."""
    chosen = set(select_cpus(vcpus, host))
    cores = [core for core in host.cores if set(core) & chosen]
    first: list[tuple[int, ...]] = []
    while cores[len(first):] and sum(map(len, first)) < vcpus // 2:
        first.append(cores[len(first)])
    second = cores[len(first):]
    whole = all(set(core) <= chosen for core in cores)
    if not whole or sum(map(len, first)) != vcpus // 2 or sum(map(len, second)) != vcpus // 2:
        per_core = max(len(core) for core in host.cores)
        raise SizerError(f"an instance of {vcpus} vCPUs cannot be halved into whole cores on this host "
                         f"({per_core} threads per core): give a vCPU count that is a multiple of {2 * per_core}")
    return HostCpus(tuple(first)), HostCpus(tuple(second))


def fastest_disk(disks: list[str], table: Mapping[str, DiskClass]) -> str:
    """The disk class with the most read bandwidth (an unthrottled one first), of those listed."""
    def read_mbps(name: str) -> float:
        mbps = table[name].read_mbps
        return math.inf if mbps is None else float(mbps)

    return max(disks, key=read_mbps)


@dataclass(frozen=True)
class PlannedPair:
    """Two jobs (workload entries, sorted) on halves of one instance, its GPU shared as `sharing`
    says; `halves` holds each job's point on its half (its workload, settings and half shape)."""

    jobs: tuple[str, str]
    profile: str
    instance: InstanceShape
    sharing: str
    halves: tuple[PlannedPoint, PlannedPoint]

    @property
    def key(self) -> str:
        """The pair's identity: '<A>+<B>/<profile>/<instance shape key>/<sharing>'."""
        return f"{self.jobs[0]}{PAIR_SEPARATOR}{self.jobs[1]}/{self.profile}/{self.instance.key}/{self.sharing}"

    @property
    def share_of(self) -> str:
        """What a point of the pair records of the instance it had half of: '<shape key>/<sharing>'."""
        return f"{self.instance.key}/{self.sharing}"

    def shared_key(self, job: int) -> str:
        """The stored key of job `job` (0 or 1) measured beside its partner."""
        return f"{self.key}#job{job + 1}"

    def alone_key(self, job: int) -> str:
        """The stored key of job `job` alone on its half: one per job and half, whatever the partner."""
        return f"{self.jobs[job]}/{self.profile}/{self.share_of}#alone"

    def label(self) -> str:
        return f"{self.jobs[0]} {PAIR_SEPARATOR} {self.jobs[1]} on one GPU ({self.sharing}) @ {self.instance.label()}"

    def alone_label(self, job: int) -> str:
        return f"{self.jobs[job]} alone on half of {self.instance.label()} ({self.sharing})"

    def mark(self, job: int, alone: bool, cpus: tuple[int, ...], disk_share: float) -> dict[str, Any]:
        """What a point of the pair keeps under `extra["colocated"]` (`sizer.store_schema` reads it)."""
        return {
            "job": self.jobs[job],
            "partner": "" if alone else self.jobs[1 - job],
            "pair": "" if alone else self.key,
            "slot": job + 1,
            "share_of": self.share_of,
            "sharing": self.sharing,
            "instance": self.instance.as_dict(),
            "half": {"vcpus": self.halves[job].shape.vcpus, "ram_gib": self.halves[job].shape.ram_gib,
                     "cpus": list(cpus), "disk_share": disk_share},
        }


def plan_pairs(pairs: list[tuple[str, str]], instance: InstanceShape, sharing: str, profile: str,
               config: Mapping[str, Any]) -> list[PlannedPair]:
    """Each pair on halves of `instance` (a SizerError where it cannot be halved); each job's point
    carries its entry's settings on top of `config` (--set)."""
    half = half_of(instance)

    def on_half(entry: str) -> PlannedPoint:
        variant = Variant.parse(entry)
        return PlannedPoint(variant.workload, profile, half, {**dict(config), **variant.config})

    return [PlannedPair(jobs, profile, instance, sharing, (on_half(jobs[0]), on_half(jobs[1]))) for jobs in pairs]


def pairs_estimate_s(pairs: list[PlannedPair], estimate_point_s: Callable[[PlannedPoint], float]) -> float:
    """Seconds the pairs take: each pair as long as its longer job, and each job alone on its half once."""
    total, alone = 0.0, set()
    for pair in pairs:
        total += max(estimate_point_s(p) for p in pair.halves)
        for job in (0, 1):
            if pair.alone_key(job) not in alone:
                alone.add(pair.alone_key(job))
                total += estimate_point_s(pair.halves[job])
    return total


def pair_outline(pair: PlannedPair, estimate_point_s: Callable[[PlannedPoint], float]) -> dict[str, Any]:
    """A planned pair as the dry run and the summary show it."""
    half = pair.halves[0].shape
    return {"key": pair.key, "jobs": list(pair.jobs), "sharing": pair.sharing, "instance": pair.instance.as_dict(),
            "half": {**dataclasses.asdict(half), "disk_share": JOB_SHARE},
            "estimated_s": round(max(estimate_point_s(p) for p in pair.halves), 1)}
