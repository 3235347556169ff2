"""What a fleet sweep runs on a node, inside a Ray task: the plan, rebuilt there from the sweep's
options (so it is checked against the node's CPUs, RAM, GPUs, data path and limit backend), the
node's host record, and one point measured as a local sweep measures it (the host lock, the
shape's limit group, a fresh worker process).

A Ray worker process serves many tasks: the plan, the host record and the datasets are made once
per process. Nothing here writes the store: the driver alone does (sizer.fleet.run).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from sizer import __version__
from sizer.errors import LockHeld, SizerError
from sizer.fleet.identity import this_node
from sizer.fleet.options import FleetOptions
from sizer.limits import cleanup_leftovers
from sizer.lock import HostLock
from sizer.shapes import InstanceShape, PlannedPoint, host_gpu_ids
from sizer.sweep.calibration import calibrate
from sizer.sweep.data import prepare_datasets
from sizer.sweep.execute import host_info
from sizer.sweep.measure import keep_steadier, measure_point, wants_repeat
from sizer.sweep.outputs import dry_run_summary
from sizer.sweep.plan import CALIBRATION_WORKLOAD, SweepOptions, SweepPlan, load_workload_classes, plan_sweep
from sizer.units import GIB
from workloads.protocol import Result

LOCK_POLL_S = 1.0
# How long a point waits for its node's host lock (a local sweep on that machine) before it fails.
LOCK_PATIENCE_S = 3600.0
WHOLE_NODE_RAM_STEP_GIB = 0.5

_PLANS: dict[str, SweepPlan] = {}
_HOSTS: dict[str, dict[str, Any]] = {}
_DATASETS: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
_CLEANED: list[bool] = []


@dataclass
class NodePlan:
    """A target's plan as a node of it made it: its points, their identity and the node's host."""
    target: str
    node_id: str
    host: dict[str, Any]
    config: dict[str, Any]
    points: list[PlannedPoint]
    profile: str
    estimate_s: dict[str, float]  # point key -> its budget and overhead
    notes: list[str]
    sizer_version: str
    dry_run: dict[str, Any]


@dataclass
class NodeOutcome:
    """One point's task: its measurement, or (`result` None) why the node measured nothing."""
    target: str
    key: str
    node_id: str
    host: dict[str, Any] | None
    result: Result | None = None
    enforced: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    wall_s: float = 0.0
    reason: str = ""


# ---------------------------------------------------------------- the plan and the host
def whole_node_ram_gib(host_ram: int) -> float:
    """A whole node's RAM as a shape's level: the host's, rounded down to WHOLE_NODE_RAM_STEP_GIB."""
    return math.floor(host_ram / GIB / WHOLE_NODE_RAM_STEP_GIB) * WHOLE_NODE_RAM_STEP_GIB


def is_whole_node(plan: SweepPlan, host: dict[str, Any], shape: InstanceShape) -> bool:
    """A shape that narrows nothing of the node: all its vCPUs and GPUs, its RAM (to the level
    `whole_node_ram_gib` gives) and an unthrottled disk class. A point of it measured the real
    instance, not an emulation of a smaller one."""
    gpus = len(host.get("gpus") or [])
    return (shape.vcpus >= plan.cpus.threads and shape.ram_gib >= whole_node_ram_gib(plan.host_ram)
            and not plan.disk_table[shape.disk_class].throttled and (gpus == 0 or shape.gpus >= gpus))


def add_whole_node_points(plan: SweepPlan) -> None:
    """`--fleet-whole-node`: each workload entry also at the node's whole shape (its vCPUs, RAM and
    the GPUs it can use), on the plan's first unthrottled disk class (the node's own disk as it is)."""
    disks = [d for d in plan.config["disks"] if not plan.disk_table[d].throttled]
    if not disks:
        plan.notes.append("--fleet-whole-node: --disks has no unthrottled class, so no whole-node point")
        return
    ram_gib = whole_node_ram_gib(plan.host_ram)
    # On the other profiles a shape's GPUs are CPU processes (a test mode), not the node's GPUs.
    gpus = max(1, len(host_gpu_ids())) if plan.profile == "gpu" else 1
    keys = {p.key for p in plan.points}
    for point in [p for p in plan.points if not p.ceiling and p.pass_no == 1]:
        cls = plan.classes.get(point.workload)
        # A one-GPU workload cannot take more than one (workloads.distributed refuses it).
        shape = InstanceShape(plan.cpus.threads, ram_gib, disks[0], gpus if cls is not None and cls.multi_gpu else 1)
        whole = PlannedPoint(point.workload, point.profile, shape, dict(point.config))
        if whole.key not in keys:
            plan.points.append(whole)
            keys.add(whole.key)


def node_plan(opts: SweepOptions, fleet: FleetOptions) -> SweepPlan:
    """The sweep's plan on this node (made once per worker process)."""
    key = repr(opts)
    if key not in _PLANS:
        plan = plan_sweep(opts)
        if opts.calibrate and CALIBRATION_WORKLOAD not in plan.classes:
            with contextlib.suppress(SizerError):  # no calibration workload: the host gets no calibration
                plan.classes.update(load_workload_classes([CALIBRATION_WORKLOAD]))
        if fleet.whole_node:
            add_whole_node_points(plan)
        _PLANS[key] = plan
    return _PLANS[key]


def node_host(plan: SweepPlan, node_id: str, node_types: str) -> dict[str, Any]:
    """The store's record of this node's host (sizer.sweep.execute.host_info), with the node types it
    offers: two nodes on one machine are two hosts of the fleet."""
    key = str(plan.data_dir)
    if key not in _HOSTS:
        plan.data_dir.mkdir(parents=True, exist_ok=True)  # the probe describes the disk behind it
        _HOSTS[key] = host_info(plan)
    return {**_HOSTS[key], "fleet_node": node_types or node_id, "ray_node_id": node_id}


def plan_on_node(opts: SweepOptions, fleet: FleetOptions, target: str) -> NodePlan:
    """Ray task: the target's plan, checked on a node of it (a SizerError names the first problem)."""
    plan = node_plan(opts, fleet)
    node_id, node_types = this_node()
    return NodePlan(
        target=target, node_id=node_id, host=node_host(plan, node_id, node_types), config=dict(plan.config),
        points=list(plan.points), profile=plan.profile, estimate_s={p.key: plan.estimate_point_s(p) for p in plan.points},
        notes=list(plan.notes), sizer_version=__version__, dry_run=dry_run_summary(plan, opts),
    )


# ---------------------------------------------------------------- measuring
@contextlib.contextmanager
def node_lock(opts: SweepOptions, patience_s: float = LOCK_PATIENCE_S) -> Iterator[None]:
    """The host's lock (one sweep per host), waited for up to `patience_s`: a local sweep on the
    node's machine, or another node of the same machine, delays the fleet's points there instead of
    failing them."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            lock = HostLock(opts.lock_path).acquire()
            break
        except LockHeld:
            if time.monotonic() >= deadline:
                raise
            time.sleep(LOCK_POLL_S)
    try:
        if not _CLEANED:  # limit groups a killed sweep left on this machine
            cleanup_leftovers()
            _CLEANED.append(True)
        yield
    finally:
        lock.release()


def node_datasets(plan: SweepPlan, kinds: list[str] | None = None) -> dict[str, Any]:

    key = (str(plan.data_dir), tuple(plan.datasets if kinds is None else kinds))
    if key not in _DATASETS:
        _DATASETS[key] = prepare_datasets(plan.dataset_needs(list(key[1])))
    return _DATASETS[key]


def measure_on_node(opts: SweepOptions, fleet: FleetOptions, target: str, key: str) -> NodeOutcome:
    """Ray task: measure the point `key` on this node, with --repeat-noisy's second measurement."""
    node_id, node_types = this_node()
    started = time.time()
    try:
        plan = node_plan(opts, fleet)
        host = node_host(plan, node_id, node_types)
    except SizerError as exc:
        return NodeOutcome(target, key, node_id, None, started=started, reason=f"{node_types or node_id}: {exc}")
    point = next((p for p in plan.points if p.key == key), None)
    if point is None:
        return NodeOutcome(target, key, node_id, host, started=started,
                           reason=f"{key} is not in the plan on {host.get('hostname')} ({node_types}): a node of "
                                  "another shape? give the grid explicitly (--vcpus, --ram)")
    try:
        with node_lock(opts):
            datasets = node_datasets(plan)
            run = measure_point(plan, point, datasets)
            if wants_repeat(run.result, opts.repeat_spread):
                run = keep_steadier(run, measure_point(plan, point, datasets))
    except SizerError as exc:
        return NodeOutcome(target, key, node_id, host, started=started, reason=str(exc))
    run.result.extra["fleet"] = {"target": target, "node": node_types, "node_id": node_id}
    run.result.extra["real_instance"] = is_whole_node(plan, host, point.shape)
    return NodeOutcome(target, key, node_id, host, run.result, run.enforced, run.started, run.wall_s)


def calibrate_on_node(opts: SweepOptions, fleet: FleetOptions, target: str) -> dict[str, Any]:
    """Ray task: this node's host calibration (sizer.sweep.calibration), for its sweep's record."""
    plan = node_plan(opts, fleet)
    cls = plan.classes.get(CALIBRATION_WORKLOAD)
    kinds = sorted(set(plan.datasets) | ({cls.dataset} if cls is not None and cls.dataset else set()))
    with node_lock(opts):
        return calibrate(plan, node_datasets(plan, kinds), 0.0)
