"""Pairs of jobs measured on one GPU (`sizer colocate`, docs/design.md, "Two jobs on one GPU"): each
pair's record from its points. Pure: points in, records out.

For job A beside job B, the slowdown r_AB is A's rate alone on its half of the instance over its
rate beside B: the time a piece of A's work takes shared over the time it takes alone (the factor
of the seed study on shared GPUs).

The verdict. Give each job work that takes it a time T alone. One after the other, the pair takes
2T. Shared, both advance at once, A at 1/r_AB and B at 1/r_BA of their speeds alone; with
r_AB <= r_BA, A ends at r_AB T and B then runs alone on what is left, T (1 - r_AB / r_BA). The
pair shared ends at T (1 + r_AB - r_AB / r_BA), below 2T exactly when 1/r_AB + 1/r_BA > 1: when
the pair's combined time shared is below the sum of its times alone. Sharing is then faster.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from sizer.points import Point
from sizer.values import significant


@dataclass(frozen=True)
class JobProfile:
    """One job alone on its half of an instance: its rate and what it used (what predicting a pair
    reads). Shares are 0 to 1; None where not measured (no GPU, no NVML counter)."""

    job: str
    workload: str
    unit: str
    throughput: float
    vcpus: int
    gpu_busy: float | None = None  # the share of the window the GPU was busy (NVML utilisation)
    gpu_mem_gib: float | None = None  # the GPU memory in use at its peak (NVML)
    cpu_busy: float | None = None  # CPU use per vCPU of its half
    copy_gbps: float | None = None  # host-to-device copies over PCIe (NVML), GB/s
    gpu_mem_busy: float | None = None  # the share of the window the GPU's memory was busy (NVML)
    gpu_model: str = ""
    decode: str = ""
    input: str = ""

    @classmethod
    def of(cls, points: Sequence[Point]) -> JobProfile | None:
        """The profile of a job's usable measurements (the median one stands for them); None without one."""
        usable = sorted((p for p in points if p.usable), key=lambda p: p.throughput)
        if not usable:
            return None
        p = usable[(len(usable) - 1) // 2]
        return cls(
            job=p.job or p.workload, workload=p.workload, unit=p.unit,
            throughput=statistics.median(q.throughput for q in usable), vcpus=p.vcpus,
            gpu_busy=_share(p.gpu_util_pct), gpu_mem_gib=p.gpu_mem_peak_gib, cpu_busy=p.cpu_util_per_vcpu,
            copy_gbps=None if p.pcie_rx_mbps is None else p.pcie_rx_mbps / 1000.0,
            gpu_mem_busy=_share(p.gpu_mem_util_pct), gpu_model=p.gpu_model, decode=p.decode, input=p.input,
        )


def _share(percent: float | None) -> float | None:
    return None if percent is None else min(1.0, max(0.0, percent / 100.0))


def slowdown(alone: float | None, shared: float | None) -> float | None:
    """r: the rate alone over the rate shared (time shared over time alone); None without both."""
    if not alone or not shared or alone <= 0 or shared <= 0:
        return None
    return alone / shared


def shared_is_faster(r_ab: float, r_ba: float) -> bool:
    """The verdict (see the module): the pair shared ends sooner than one job after the other."""
    return 1.0 / r_ab + 1.0 / r_ba > 1.0


def time_shared_over_apart(r_ab: float, r_ba: float) -> float:
    """The pair's time shared over its time one after the other, for work each does in one time T alone."""
    low, high = sorted((r_ab, r_ba))
    return (1.0 + low - low / high) / 2.0


@dataclass(frozen=True)
class PairRecord:
    """One measured pair: its jobs (sorted), the instance whose halves they had and how the GPU was
    shared, each job's rate beside the other (None: no usable measurement), each job alone on its
    half, and the GPU while shared."""

    jobs: tuple[str, str]
    share_of: str
    profile: str
    host_id: int | None
    instance_vcpus: int
    instance_ram_gib: float
    disk_class: str
    shared: tuple[float | None, float | None]
    alone: tuple[JobProfile | None, JobProfile | None]
    units: tuple[str, str]
    gpu_util_shared_pct: float | None = None
    gpu_mem_shared_gib: float | None = None
    failed: tuple[str, ...] = ()  # what became of the measurements that have no figure

    @property
    def sharing(self) -> str:
        return self.share_of.rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        return f"{self.jobs[0]}+{self.jobs[1]}/{self.profile}/{self.share_of}"

    @property
    def slowdowns(self) -> tuple[float | None, float | None]:
        """(r_AB, r_BA)."""
        return tuple(slowdown(None if a is None else a.throughput, s)  # type: ignore[return-value]
                     for a, s in zip(self.alone, self.shared))

    @property
    def measured(self) -> bool:
        """Both slowdowns are known."""
        return None not in self.slowdowns

    @property
    def shared_faster(self) -> bool | None:
        r_ab, r_ba = self.slowdowns
        return None if r_ab is None or r_ba is None else shared_is_faster(r_ab, r_ba)


def pair_records(points: Iterable[Point]) -> list[PairRecord]:
    """Every pair the points hold (each job's points beside its partner, with the same job alone on
    its half where measured), per host, profile and instance, in key order."""
    points = [p for p in points if p.share_of]
    alone: dict[tuple, list[Point]] = {}
    for p in points:
        if not p.partner:
            alone.setdefault((p.host_id, p.profile, p.share_of, p.job), []).append(p)
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        if p.partner:
            groups.setdefault((p.host_id, p.profile, p.share_of, tuple(sorted((p.job, p.partner)))), []).append(p)
    records = [_record(key, group, alone) for key, group in groups.items()]
    return sorted(records, key=lambda r: (str(r.host_id), r.key))


def _record(key: tuple, group: list[Point], alone: dict[tuple, list[Point]]) -> PairRecord:
    host_id, profile, share_of, jobs = key
    mine = [[p for p in group if p.job == job] for job in jobs] if jobs[0] != jobs[1] else [group, group]
    profiles = tuple(JobProfile.of(alone.get((host_id, profile, share_of, job), [])) for job in jobs)
    shared = tuple(_median([p.throughput for p in own if p.usable]) for own in mine)
    utils = [p.gpu_util_pct for p in group if p.usable and p.gpu_util_pct is not None]
    mems = [p.gpu_mem_peak_gib for p in group if p.gpu_mem_peak_gib is not None]
    failed = tuple(f"{p.job} beside {p.partner}: {_outcome(p)}" for p in group if not p.usable)
    for job, prof in zip(dict.fromkeys(jobs), profiles):
        if prof is None:
            tried = alone.get((host_id, profile, share_of, job), [])
            failed += (f"{job} alone on its half: " + (", ".join(map(_outcome, tried)) if tried else "not measured"),)
    half = group[0]
    return PairRecord(jobs=jobs, share_of=share_of, profile=profile, host_id=host_id, instance_vcpus=2 * half.vcpus,
                      instance_ram_gib=2 * half.ram_gib, disk_class=half.disk_class, shared=shared,  # type: ignore[arg-type]
                      alone=profiles, units=tuple(own[0].unit if own else "" for own in mine),  # type: ignore[arg-type]
                      gpu_util_shared_pct=_median(utils), gpu_mem_shared_gib=max(mems) if mems else None,
                      failed=failed)


def _outcome(p: Point) -> str:
    return p.status if p.throughput > 0 else f"{p.status}, no figure"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def pair_json(record: PairRecord) -> dict[str, Any]:
    """A pair's record as the sweep's summary, `sizer colocate --json` and results.json give it."""
    r = record.slowdowns
    jobs = []
    for i in (0, 1):
        prof = record.alone[i]
        jobs.append({
            "job": record.jobs[i],
            "partner": record.jobs[1 - i],
            "unit": record.units[i],
            "shared": significant(record.shared[i], 6),
            "alone": None if prof is None else significant(prof.throughput, 6),
            "slowdown": significant(r[i], 4),
            "gpu_util_alone_pct": None if prof is None or prof.gpu_busy is None else significant(100 * prof.gpu_busy, 4),
            "gpu_mem_alone_gib": None if prof is None else significant(prof.gpu_mem_gib, 4),
            "cpu_util_per_vcpu_alone": None if prof is None else significant(prof.cpu_busy, 3),
        })
    faster = record.shared_faster
    combined = None if not record.measured else 1 / r[0] + 1 / r[1]  # type: ignore[operator]
    return {
        "key": record.key,
        "jobs": jobs,
        "sharing": record.sharing,
        "profile": record.profile,
        "host_id": record.host_id,
        "instance": {"vcpus": record.instance_vcpus, "ram_gib": record.instance_ram_gib, "disk_class": record.disk_class},
        "r_ab": significant(r[0], 4),
        "r_ba": significant(r[1], 4),
        "combined_progress": significant(combined, 4),
        "time_shared_over_apart": None if not record.measured else significant(
            time_shared_over_apart(r[0], r[1]), 4),  # type: ignore[arg-type]
        "shared_faster": faster,
        "verdict": verdict_words(record),
        "gpu_util_shared_pct": significant(record.gpu_util_shared_pct, 4),
        "gpu_mem_shared_gib": significant(record.gpu_mem_shared_gib, 4),
        "failed": list(record.failed),
    }


def verdict_words(record: PairRecord) -> str:
    """The verdict in words, with the figures it rests on."""
    if not record.measured:
        return "not measured: " + ("; ".join(record.failed) or "a job has no usable figure")
    r_ab, r_ba = record.slowdowns
    combined = 1 / r_ab + 1 / r_ba  # type: ignore[operator]
    a, b = record.jobs
    head = "shared is faster" if combined > 1 else "one after the other is faster"
    return (f"{head}: 1/r_AB + 1/r_BA = {combined:.2f} ({a} {r_ab:.2f}x slower beside {b}, {b} {r_ba:.2f}x slower "
            f"beside {a}); the pair shared takes {time_shared_over_apart(r_ab, r_ba):.0%} of its time one after "  # type: ignore[arg-type]
            "the other")
