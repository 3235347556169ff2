"""Running a planned sweep: take the host's lock, open (or resume) the sweep in the store, calibrate,
prepare the datasets, then measure and commit point by point; and `sizer run`'s single point."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from sizer.errors import SizerError
from sizer.limits import cleanup_leftovers
from sizer.lock import HostLock
from sizer.method import current_marks
from sizer.store import Store
from sizer.sweep.adaptive_run import measure_adaptively
from sizer.sweep.colocate import PairRunner
from sizer.sweep.data import prepare_datasets
from sizer.sweep.dependencies import LEFT_OUT_KEY, DependencyCheck
from sizer.sweep.measure import measure_point
from sizer.sweep.outputs import about_minutes, count_statuses, dry_run_summary
from sizer.sweep.parallel import ParallelRunner, parallel_summary, plan_parallel
from sizer.sweep.plan import CALIBRATION_WORKLOAD, SweepOptions, SweepPlan, load_workload_classes, plan_sweep
from sizer.sweep.signals import stop_on_signals
from sizer.sweep.state import OnPoint, SweepRun, host_info


def _add_calibration_workload(plan: SweepPlan, opts: SweepOptions) -> None:
    """The calibration's workload, where it is installed and its modules are here (else a note)."""
    if opts.calibrate and CALIBRATION_WORKLOAD not in plan.classes:
        try:
            classes = load_workload_classes([CALIBRATION_WORKLOAD])
        except SizerError:
            plan.notes.append(f"no {CALIBRATION_WORKLOAD} workload installed: this sweep has no calibration")
            return
        missing = DependencyCheck(plan.profile).entry(CALIBRATION_WORKLOAD, classes[CALIBRATION_WORKLOAD], {})
        if missing is not None:
            plan.notes.append(f"this sweep has no calibration: {missing.line()}")
            return
        plan.classes.update(classes)


def run_sweep(opts: SweepOptions, progress: bool = True, on_point: OnPoint | None = None) -> dict[str, Any]:
    """Plan, check, then measure every point not yet stored on this host; returns a summary
    (JSON-friendly) naming the store and the sweep it measured (`sweep_ids`), and whether every
    planned point is stored (`complete`). A fleet sweep (`--ray`) runs through `sizer.fleet`."""
    if opts.fleet is not None:
        raise SizerError("a fleet sweep (--ray) runs through sizer.fleet.run_fleet, not on this host")
    plan = plan_sweep(opts)
    _add_calibration_workload(plan, opts)  # before the dry run, whose estimate counts the calibration
    parallel = plan_parallel(plan, opts)  # slots, dataset copies and their disk space, checked before any work
    if opts.dry_run:
        planned = dry_run_summary(plan, opts)
        if parallel is not None:
            planned["parallel"] = parallel.outline()
            planned["notes"] = [*planned["notes"], *parallel.notes]
            if planned.get("adaptive"):  # its searches share the slots: the most they take, spread over them
                slots = len(parallel.slots)
                planned["adaptive"].update(slots=slots, at_most_in_slots=about_minutes(
                    planned["adaptive"]["at_most_seconds"] / slots))
        return planned
    summary: dict[str, Any] = {"profile": plan.profile, "points": [], "notes": plan.notes, "left_out": plan.left_out}
    started = time.monotonic()
    with HostLock(opts.lock_path), stop_on_signals():
        summary["leftovers_removed"] = cleanup_leftovers()
        plan.data_dir.mkdir(parents=True, exist_ok=True)
        host = host_info(plan)
        with Store(plan.store) as store:
            sweep = SweepRun(plan, opts, store, summary, started, on_point, progress)
            if parallel is not None:
                runner = ParallelRunner(sweep, parallel)
                sweep.measure_many, sweep.feed_many = runner.run, runner.run_fed
            if plan.pairs:
                sweep.measure_pairs = PairRunner(sweep).run
            sweep.open(host)
            sweep.prepare()
            sweep.keep(LEFT_OUT_KEY, plan.left_out or None)  # the report names each workload left out
            sweep.measure_all(measure_adaptively if opts.strategy == "adaptive" else None)
            sweep.finish()
            if parallel is not None:
                summary["parallel"] = parallel_summary(parallel, store, sweep.sweep_id)
    summary["statuses"] = count_statuses(summary["points"])
    return summary


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
    gpus: int = 1,
) -> dict[str, Any]:
    """`sizer run`: one point, measured like a sweep's (cold dataset, fresh worker, real limits)."""
    opts = SweepOptions(
        workloads=[workload], vcpus=[vcpus], ram_bytes=[ram_bytes], disks=[disk], profile=profile,
        data_dir=data_dir, config=dict(config or {}), disk_classes_file=disk_classes_file,
        time_budget_s=time_budget_s, ceiling=False, limits=limits, lock_path=lock_path, out_dir=None,
        cpu_quota=cpu_quota, passes=1, refine=0, gpus=[gpus],
    )
    plan = plan_sweep(opts)
    point = plan.points[0]
    with HostLock(lock_path), stop_on_signals():
        removed = cleanup_leftovers()
        datasets = prepare_datasets(plan.dataset_needs())
        run = measure_point(plan, point, datasets)
    r = run.result
    return {
        "key": point.key,
        "workload": workload,
        **point.shape.as_dict(),
        "gpus": point.shape.gpus,
        "profile": plan.profile,
        "status": r.status,
        "marks": list(current_marks(r)),
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
