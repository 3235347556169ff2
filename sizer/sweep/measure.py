"""Measuring one point of a sweep: evict its dataset, create its shape's limit group, run a fresh
worker in it, remove the group; and measuring a noisy point once more, keeping the steadier."""

from __future__ import annotations

from sizer import cache
from sizer.errors import SizerError
from sizer.limits import DiskThrottle, LimitRequest
from sizer.points import USABLE_STATUSES
from sizer.runner import PointRun, gpu_env, run_point
from sizer.shapes import HostCpus, InstanceShape, PlannedPoint, select_cpus
from sizer.sweep.data import Dataset
from sizer.sweep.plan import SweepPlan
from sizer.sweep.signals import STOP
from sizer.units import GIB
from workloads.protocol import Result, Spec

# A worker does not know the disk cap: reading at this share of it or more, the point is disk-bound.
DISK_BOUND_SHARE = 0.8


def _share(value: int | None, share: float) -> int | None:
    return None if value is None else max(1, int(value * share))


def limit_request(plan: SweepPlan, shape: InstanceShape, label: str, memory: bool = True,
                  cpus: HostCpus | None = None, disk_share: float = 1.0) -> LimitRequest:
    """The shape's limits; its vCPUs from `cpus` (a parallel sweep's slot, a pair's half), else from
    the host's; its disk class's caps times `disk_share` (a pair's job: half of them)."""
    disk = plan.disk_table[shape.disk_class]
    throttle = None
    if plan.device is not None:
        # Unthrottled classes still name the device, so bytes read from it are counted.
        throttle = DiskThrottle(
            device=plan.device,
            read_bps=_share(disk.read_bps, disk_share),
            write_bps=_share(disk.write_bps, disk_share),
            read_iops=_share(disk.read_iops, disk_share),
            write_iops=_share(disk.write_iops, disk_share),
        )
    return LimitRequest(
        cpus=select_cpus(shape.vcpus, cpus or plan.cpus),
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
    gpus: tuple[int, ...] | None = None,
    cpus: HostCpus | None = None,
    disk_share: float = 1.0,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> PointRun:
    """Evict the dataset, create the shape's group, run a fresh worker in it, remove the group.
    `gpus`: the host GPUs (indices, `sizer.runner.gpu_env`) the point's processes use; default the
    first `point.shape.gpus` of them. `cpus`: the CPUs its vCPUs are taken from (a parallel
    sweep's slot, `sizer.sweep.placement`; a pair's half), default the host's. `disk_share`: the
    share of the disk class's caps it gets (a pair's job: half). `env`: variables the worker gets
    besides (a pair's job: its pairing); `timeout_s`: its limit, default `runner.default_timeout`."""
    cls = plan.classes[point.workload]
    dataset = datasets.get(cls.dataset) if cls.dataset else None
    evicted = cache.evict(dataset.path) if dataset is not None else None
    request = limit_request(plan, point.shape, f"{point.workload}-{point.shape.key}", memory=memory_limit, cpus=cpus,
                            disk_share=disk_share)
    spec = Spec(
        workload=point.workload,
        profile=point.profile,
        vcpus=point.shape.vcpus,
        ram_bytes=int(point.shape.ram_bytes) if memory_limit else 0,
        gpus=point.shape.gpus,
        data_dir=str(dataset.path if dataset is not None else plan.data_dir),
        config=cls.spec_config(point.profile, point.config),
        seed=0,
        time_budget_s=float(time_budget_s or plan.time_budget_s),
    )
    # On cpu-small the "GPUs" are CPU processes (a test mode of the multi-GPU code): no GPU to name.
    used_gpus = point_gpus(point, gpus) if plan.profile == "gpu" else None
    try:
        group = plan.backend.create(request)
    except OSError as exc:
        raise SizerError(f"cannot create the limit group for {point.label()}: {exc}") from None
    worker_env = {**(env or {}), **({} if used_gpus is None else gpu_env(used_gpus))}
    with group:
        run = run_point(spec, group, interpreter=cls.interpreter, unit=cls.unit, framework=cls.framework,
                        should_stop=STOP.is_set, env=worker_env or None, timeout_s=timeout_s)
    result = run.result
    if not result.config:
        # A worker killed before it answered (oom, timeout) reports no settings: the planned ones
        # keep the point in its workload variant (e.g. decode=gpu) for the fit and the report.
        result.config = {**cls.defaults.get(point.profile, {}), **point.config}
    result.extra.setdefault("shape", point.shape.as_dict())
    result.extra["cpus"] = list(request.cpus)
    if used_gpus is not None:
        result.extra["gpu_indices"] = list(used_gpus)
    if point.pass_no > 1:
        result.extra["pass"] = point.pass_no
    if dataset is not None:
        result.extra["evicted"] = evicted
        result.extra.setdefault("dataset_bytes", dataset.nbytes)
        result.extra.setdefault("dataset_gib", dataset.nbytes / GIB)
    _mark_disk_bound(plan, point, result, disk_share)
    return run


def _mark_disk_bound(plan: SweepPlan, point: PlannedPoint, result: Result, disk_share: float = 1.0) -> None:
    disk = plan.disk_table[point.shape.disk_class]
    seconds = result.counters.get("measured_seconds") or 0.0
    read_bytes = result.counters.get("read_bytes") or 0.0
    if (disk.read_bps and seconds and result.status in USABLE_STATUSES
            and read_bytes / seconds >= DISK_BOUND_SHARE * disk.read_bps * disk_share):
        result.bottleneck = "disk"


def point_gpus(point: PlannedPoint, gpus: tuple[int, ...] | None) -> tuple[int, ...]:
    """The GPUs a point uses: those given (one per GPU of its shape), else the host's first ones."""
    if gpus is None:
        return tuple(range(point.shape.gpus))
    if len(gpus) != point.shape.gpus:
        raise SizerError(f"{point.label()} needs {point.shape.gpus} GPU(s), given {len(gpus)}: {list(gpus)}")
    return tuple(gpus)


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
