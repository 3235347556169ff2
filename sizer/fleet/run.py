"""A fleet sweep's driver (`sizer sweep --ray ADDRESS`): plan each target on a node of it, submit
every point not yet stored as a Ray task pinned to a node of its target, and store each result in
the one local store as it comes back; the report covers the run's sweeps.

The driver takes no host lock and measures nothing: each task takes its own node's lock. A task
whose node dies is retried by Ray on another node of its type; where none is left for
`--fleet-node-wait`, its points are stored as lost with the reason and `--resume` measures them.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sizer import __version__
from sizer.console import styled
from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.fleet import cluster
from sizer.fleet.node import NodeOutcome, NodePlan
from sizer.fleet.options import FleetOptions
from sizer.fleet.record import FleetRecord, target_identity
from sizer.preflight import check_out_folder, check_store_file
from sizer.shapes import PlannedPoint
from sizer.store import Store
from sizer.sweep.outputs import count_statuses, point_summary, stored_point_summary
from sizer.sweep.plan import DEFAULT_OUT, STORE_NAME, SweepOptions, check_target_gpu
from sizer.sweep.progress import SweepProgress, format_duration
from sizer.sweep.signals import check_stop, stop_on_signals
from sizer.sweep.strategy import check_strategy

OnPoint = Callable[[dict[str, Any]], None]
POLL_S = 1.0  # how often the driver looks for finished tasks and for targets left without a node
NODES_EVERY_S = 2.0


@dataclass
class _Task:
    """What one submitted Ray task stands for: a point of a target, or a host's calibration."""
    target: str
    point: PlannedPoint | None = None  # None: the calibration of the host `host_id`
    host_id: int = 0


def _check_options(opts: SweepOptions) -> None:

    check_strategy(opts.strategy, opts.max_points, opts.passes, opts.refine, opts.gpus, opts.fleet)
    if opts.refine:
        raise SizerError("--refine is not available with --ray: a fleet measures each target's grid as planned")
    if opts.parallel is not None and opts.parallel > 1:
        raise SizerError("--parallel is not available with --ray: a fleet measures one point per node at a time")
    if opts.max_seconds is not None:
        raise SizerError("--max-time is not available with --ray: stop the fleet sweep with Ctrl-C, --resume goes on")


def _check_report_inputs(opts: SweepOptions) -> dict[str, Any]:
    """What the driver's report reads, checked before any work: its disk-class file (its table is
    returned), its catalogs and a --gpu one of their rows has (a node never reads them)."""
    """What the driver's report reads and where it writes, checked before any work: its disk-class
    file (its table is returned), its catalogs and a --gpu one of their rows has (a node never reads
    them), the --out folder and the store."""

    disk_table = load_disk_classes(opts.disk_classes_file)
    check_target_gpu(opts)
    if opts.out_dir is not None:  # where the driver writes, checked before the cluster is asked anything
        check_out_folder(Path(opts.out_dir))
    check_store_file(store_path(opts))
    return disk_table


def node_options(opts: SweepOptions) -> SweepOptions:
    """The options a node plans with: paths made absolute (each node resolves them on its own disk),
    without the report's catalogs and GPU (the driver alone writes the report)."""
    def absolute(path: Any) -> Any:
        return None if path is None else type(path)(Path(path).expanduser().absolute())

    return dataclasses.replace(opts, data_dir=absolute(opts.data_dir), disk_classes_file=absolute(opts.disk_classes_file),
                               catalog_files=(), gpu=None, store=None, out_dir=None)


def _say(progress: bool) -> Callable[[str], None]:
    bar = SweepProgress(0, 0.0, enabled=progress)
    return bar.note


def plan_targets(opts: SweepOptions, fleet: FleetOptions, targets: tuple[str, ...],
                 say: Callable[[str], None]) -> dict[str, NodePlan]:
    """Each target's plan, made and checked on a node of it. A target no node offers is waited for
    up to --fleet-node-wait (an autoscaler may start one); a plan a node refuses is a SizerError."""
    refs = {cluster.submit_plan(opts, fleet, target): target for target in targets}
    offered = cluster.offered_targets()
    for target in targets:
        if target not in offered:
            say(f"no node offers {target} with a sizer-slot yet: waiting up to {format_duration(fleet.node_wait_s)}")
    plans: dict[str, NodePlan] = {}
    deadline = time.monotonic() + fleet.node_wait_s
    try:
        while refs:
            check_stop()
            for ref in cluster.wait(list(refs), POLL_S):
                target = refs.pop(ref)
                plan, error = cluster.fetch(ref)
                if error is not None:
                    raise SizerError(f"{target}: {error}")
                plans[target] = plan
            if not refs or time.monotonic() <= deadline:
                continue
            offered = cluster.offered_targets()  # a ray.nodes() call: once per poll, past the deadline only
            missing = sorted(t for t in refs.values() if t not in offered)
            if missing:
                raise SizerError(f"no node offers {', '.join(missing)} with a sizer-slot (waited "
                                 f"{format_duration(fleet.node_wait_s)}): start one (docs/fleet.md), or leave the "
                                 "target out of --fleet-targets")
    finally:
        cluster.cancel(list(refs))
    for plan in plans.values():
        if plan.sizer_version != __version__:
            say(f"{plan.target}: the node runs sizer {plan.sizer_version}, this driver {__version__}")
    return {t: plans[t] for t in targets}


def dry_run(fleet: FleetOptions, plans: dict[str, NodePlan]) -> dict[str, Any]:
    """Each target's plan as a node of it made it, measuring nothing."""
    return {
        "dry_run": True,
        "fleet": {"address": fleet.address, "targets": {
            t: {**p.dry_run, "planned_on": p.host.get("hostname"), "node": p.host.get("fleet_node")}
            for t, p in plans.items()}},
    }


def store_path(opts: SweepOptions) -> Path:
    return Path(opts.store) if opts.store else Path(opts.out_dir or DEFAULT_OUT) / STORE_NAME


def run_fleet(opts: SweepOptions, progress: bool = True, on_point: OnPoint | None = None) -> dict[str, Any]:
    """Plan on the nodes, measure every point not yet stored on a node of its target, store each
    as it comes back, write the report; returns the summary (JSON-friendly)."""
    fleet: FleetOptions = opts.fleet
    _check_options(opts)
    disk_table = _check_report_inputs(opts)
    cluster.connect(fleet.address)
    try:
        with stop_on_signals():
            targets = cluster.resolve_targets(fleet)
            plans = plan_targets(node_options(opts), fleet, targets, _say(progress))
            if opts.dry_run:
                return dry_run(fleet, plans)
            with Store(store_path(opts)) as store:
                return _FleetRun(opts, fleet, plans, store, on_point, disk_table).run(progress)
    finally:
        cluster.disconnect()


class _FleetRun:
    """One run of a fleet sweep: its tasks in flight, its record in the store, its summary."""
    def __init__(self, opts: SweepOptions, fleet: FleetOptions, plans: dict[str, NodePlan], store: Store,
                 on_point: OnPoint | None, disk_table: dict[str, Any] | None = None):
        self.opts, self.fleet, self.plans, self.store, self.on_point = opts, fleet, plans, store, on_point
        self.disk_table = disk_table  # the report's, read by the driver (a node never reads it)
        self.node_opts = node_options(opts)
        identities = {t: target_identity(p.config, list(plans), t, fleet.whole_node) for t, p in plans.items()}
        self.record = FleetRecord(store, opts.command, identities)
        self.tasks: dict[Any, _Task] = {}
        self.without_node: dict[str, float] = {}  # target -> since when no node offers it
        # Host id -> its calibration ({} where it failed, None while it is measured), and the sweeps
        # of the host that wait for it: one calibration per host, whatever targets it offers.
        self.calibrations: dict[int, dict[str, Any] | None] = {}
        self.uncalibrated: dict[int, list[int]] = {}
        self.nodes_checked = 0.0
        self.completed = 0
        self.bar = SweepProgress(0, 0.0, enabled=False)
        self.summary: dict[str, Any] = {"profile": next(iter(plans.values())).profile, "points": [], "notes": [],
                                        "store": str(store.path)}

    def run(self, progress: bool) -> dict[str, Any]:
        resumed = self.record.open(self.opts.resume)
        if self.opts.resume and not resumed:
            self.summary["notes"].append("no earlier fleet sweep with this plan in the store: starting a new one")
        stored = {s.id: s.calibration for s in self.store.sweeps()}
        for (_, host_id), sweep_id in self.record.sweeps.items():
            if stored.get(sweep_id):
                self.calibrations[host_id] = stored[sweep_id]
        total = sum(len(p.points) for p in self.plans.values())
        estimates = [s for p in self.plans.values() for s in p.estimate_s.values()]
        with SweepProgress(total, statistics.mean(estimates) if estimates else 0.0, enabled=progress) as self.bar:
            offered = cluster.offered_targets()  # a ray.nodes() call: once, not once per target
            self.bar.slots = max(1, sum(offered.get(t, 0) for t in self.plans))
            self._submit_points()
            try:
                self._collect()
            except BaseException:
                cluster.cancel(list(self.tasks))  # Ctrl-C: nothing keeps measuring; committed points stay
                raise
        self._finish(resumed)
        return self.summary

    # ------------------------------------------------------------ submitting and collecting
    def _submit_points(self) -> None:
        for target, plan in self.plans.items():
            todo = 0
            for point in plan.points:
                if point.key in self.record.done[target]:
                    row = stored_point_summary(point, self.record.stored[(target, point.key)])
                    self.summary["points"].append({**row, "target": target})
                    self.completed += 1
                    continue
                ref = cluster.submit_measure(self.node_opts, self.fleet, target, point.key)
                self.tasks[ref] = _Task(target, point)
                todo += 1
            self.bar.note(f"{target}: {len(plan.points)} points planned on {plan.host.get('hostname')} "
                          f"({plan.host.get('fleet_node')}), {todo} to measure")

    def _collect(self) -> None:
        while self.tasks:
            check_stop()
            for ref in cluster.wait(list(self.tasks), POLL_S):
                task = self.tasks.pop(ref)
                value, error = cluster.fetch(ref)
                if task.point is None:
                    self._calibrated(task, value, error)
                elif error is not None:
                    self._lost(task.target, task.point, error, None)
                else:
                    self._arrived(task.point, value)
            self._fail_targets_without_node()

    def _arrived(self, point: PlannedPoint, outcome: NodeOutcome) -> None:
        """Store a point as it comes back, with its host's record; a new host's sweep gets its calibration."""
        if outcome.result is None:
            self._lost(outcome.target, point, outcome.reason, outcome.host)
            return
        assert outcome.host is not None, "a measured point comes with its host"
        sweep_id, new = self.record.sweep_for(outcome.target, outcome.host)
        self.record.commit(outcome, point)
        if new and self.opts.calibrate:
            self._calibrate(outcome, sweep_id)
        row = {**point_summary(point, outcome.result, outcome.wall_s), "target": outcome.target,
               "host": outcome.host.get("hostname"), "node": outcome.host.get("fleet_node"),
               "real_instance": bool(outcome.result.extra.get("real_instance")), "sweep_id": sweep_id}
        self._count(row, f"{outcome.target}: {point.label()}", outcome.wall_s)

    def _lost(self, target: str, point: PlannedPoint, reason: str, host: dict[str, Any] | None) -> None:
        result = self.record.record_lost(target, point, reason, host or self.plans[target].host)
        row = {**point_summary(point, result, 0.0), "target": target, "lost": True}
        self._count(row, f"{target}: {point.label()}", None)
        self.bar.note(styled((f"{target}: {point.label()} lost", "red"), f" ({reason})"))

    def _count(self, row: dict[str, Any], label: str, seconds: float | None) -> None:
        self.completed += 1
        self.summary["points"].append(row)
        self.bar.finish(self.completed, seconds, row, label=label)
        if self.on_point is not None:
            self.on_point(row)

    def _calibrate(self, outcome: NodeOutcome, sweep_id: int) -> None:
        """A new sweep's calibration: its host's, measured on the node that brought its first point."""
        host_id = next(h for (_, h), s in self.record.sweeps.items() if s == sweep_id)
        if host_id in self.calibrations:
            known = self.calibrations[host_id]
            if known is None:
                self.uncalibrated[host_id].append(sweep_id)
            elif known:
                self.store.set_calibration(sweep_id, known)
            return
        self.calibrations[host_id] = None
        self.uncalibrated[host_id] = [sweep_id]
        ref = cluster.submit_calibration(self.node_opts, self.fleet, outcome.target, outcome.node_id)
        self.tasks[ref] = _Task(outcome.target, None, host_id)

    def _calibrated(self, task: _Task, calibration: dict[str, Any] | None, error: str | None) -> None:
        waiting = self.uncalibrated.pop(task.host_id, [])
        self.calibrations[task.host_id] = calibration or {}
        if error is not None or not calibration:
            self.summary["notes"].append(f"{task.target}: the calibration of host {task.host_id} was lost ({error})")
            return
        for sweep_id in waiting:
            self.store.set_calibration(sweep_id, calibration)

    def _fail_targets_without_node(self) -> None:
        """Points of a target no node has offered for --fleet-node-wait: stopped, and stored as lost."""
        now = time.monotonic()
        waiting = {t.target for t in self.tasks.values()}
        if not waiting or now - self.nodes_checked < NODES_EVERY_S:
            return
        self.nodes_checked = now
        offered = cluster.offered_targets()
        for target in sorted(waiting):
            if offered.get(target):
                self.without_node.pop(target, None)
                continue
            if now - self.without_node.setdefault(target, now) < self.fleet.node_wait_s:
                continue
            refs = [ref for ref, task in self.tasks.items() if task.target == target]
            cluster.cancel(refs)
            reason = (f"no node offers {target} any more (waited {format_duration(self.fleet.node_wait_s)}): "
                      "its node was lost")
            for ref in refs:
                task = self.tasks.pop(ref)
                if task.point is not None:
                    self._lost(target, task.point, reason, None)

    # ------------------------------------------------------------ the end
    def _finish(self, resumed: bool) -> None:
        planned = {t: p.points for t, p in self.plans.items()}
        open_targets = self.record.finish(planned)
        lost = sum(len(keys) for keys in self.record.lost.values())
        if lost:
            self.summary["notes"].append(f"{lost} point(s) lost, each stored with its reason: the same command with "
                                         "--resume measures them")
        self.summary["fleet"] = {
            "address": self.fleet.address, "run": self.record.run, "resumed": resumed,
            "sweep_ids": self.record.sweep_ids(), "open": open_targets,
            "targets": {t: self._target_summary(t, p) for t, p in self.plans.items()},
        }
        self.summary["skipped"] = sum(1 for row in self.summary["points"] if row.get("stored"))
        self.summary["sweep_ids"] = self.record.sweep_ids()
        self.summary["complete"] = not lost
        self.summary["statuses"] = count_statuses(self.summary["points"])

    def _target_summary(self, target: str, plan: NodePlan) -> dict[str, Any]:
        hosts = {(found[1] if found else {}).get("fleet_node")
                 for (t, _), s in self.record.sweeps.items() if t == target for found in [self.store.sweep_host(s)]}
        return {"planned_on": plan.host.get("hostname"), "node": plan.host.get("fleet_node"),
                "points": len(plan.points), "stored": len(self.record.done[target]),
                "lost": sorted(self.record.lost[target]), "hosts": sorted(h for h in hosts if h)}
