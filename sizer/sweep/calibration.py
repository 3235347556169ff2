"""A sweep's calibration: one vCPU's decode-and-augment rate, each vCPU's with the plan's largest
vCPU count decoding at once and, where the host has more threads than that, with every thread
decoding at once (the rate a translation to another host uses: `sizer.fingerprint`), so a sweep on
this CPU model can be scaled to another. Measured once per host and CPU work, then reused by later
sweeps of that host; the host's speed over each sweep is measured anew (sizer.sweep.timeline)."""

from __future__ import annotations

from typing import Any

from sizer.points import USABLE_STATUSES
from sizer.shapes import InstanceShape, PlannedPoint
from sizer.store import Store
from sizer.sweep.data import Dataset
from sizer.sweep.defaults import REPEAT_BUDGET_S, REPEATS
from sizer.sweep.measure import measure_point
from sizer.sweep.plan import CALIBRATION_BUDGET_S, CALIBRATION_WORKLOAD, SweepPlan
from sizer.sweep.timeline import alone_point, entry_of, measure_repeats
from workloads.cpu_calibrate import calibration_method


def calibrate(plan: SweepPlan, datasets: dict[str, Dataset], at_s: float = 0.0) -> dict[str, Any]:
    """One vCPU's decode-and-augment rate: the median of REPEATS measurements in one worker, whose
    entry (`at_s` seconds into the sweep) starts the sweep's timeline; `spread` is theirs."""
    cls = plan.classes.get(CALIBRATION_WORKLOAD)
    if cls is None:
        return {"status": "skipped", "reason": f"workload {CALIBRATION_WORKLOAD} is not installed"}
    run = measure_repeats(plan)
    r = run.result
    entry = entry_of(run, at_s)
    calibration = {
        "workload": CALIBRATION_WORKLOAD,
        "status": r.status,
        "unit": r.unit,
        "throughput": entry["median"] if entry else r.throughput,
        "spread": entry["spread"] if entry else r.spread,
        "vcpus": 1,
        "cpus": r.extra.get("cpus"),
        "wall_s": round(run.wall_s, 3),
        "error": r.error,
        "method": r.extra.get("method", ""),
    }
    if entry is not None:
        calibration["ips_per_vcpu"] = entry["median"]
        calibration["timeline"] = [entry]
        busy = _largest_vcpus(plan)
        if busy > 1:
            calibration.update(_loaded_calibration(plan, datasets, alone_point(plan).shape, busy))
        calibration.update(all_busy_calibration(plan, datasets, calibration))
    return calibration


def all_busy_calibration(plan: SweepPlan, datasets: dict[str, Dataset], calibration: dict[str, Any],
                         budget_s: float | None = None) -> dict[str, Any]:
    """The per-vCPU rate with every hardware thread of the host decoding at once (`ips_per_vcpu_all_busy`
    at `all_busy_vcpus`): the plan's loaded rate where its largest count is the whole host, else
    measured (a parallel sweep's slots, a cloud instance's neighbours load the whole host)."""
    threads = plan.cpus.threads
    if int(calibration.get("loaded_vcpus") or 0) >= threads and calibration.get("ips_per_vcpu_loaded"):
        return {"ips_per_vcpu_all_busy": calibration["ips_per_vcpu_loaded"], "all_busy_vcpus": threads,
                "all_busy_spread": calibration.get("loaded_spread")}
    if threads < 2:
        return {}
    measured = _loaded_calibration(plan, datasets, alone_point(plan).shape, threads, budget_s)
    if "ips_per_vcpu_loaded" not in measured:
        return {"all_busy_status": measured.get("loaded_status"), "all_busy_error": measured.get("loaded_error")}
    return {"ips_per_vcpu_all_busy": measured["ips_per_vcpu_loaded"], "all_busy_vcpus": measured["loaded_vcpus"],
            "all_busy_spread": measured["loaded_spread"]}


def calibration_note(plan: SweepPlan) -> str:
    """What the calibration about to run does, and for about how long: said before it starts, as
    nothing else is printed meanwhile."""
    budget = CALIBRATION_BUDGET_S.get(plan.profile, 10.0)
    busy = _largest_vcpus(plan)
    runs = f"{REPEATS} times on 1 vCPU (about {REPEAT_BUDGET_S:.0f} s each)"
    runs += f", then on {busy} vCPUs at once (about {budget:.0f} s)" if busy > 1 else ""
    runs += f", then on all {plan.cpus.threads} threads at once" if plan.cpus.threads > max(busy, 1) else ""
    return (f"calibrating the CPU: {CALIBRATION_WORKLOAD} decodes and augments JPEGs {runs}, "
            "so this sweep can be scaled to another CPU model")


def _largest_vcpus(plan: SweepPlan) -> int:
    return max((p.shape.vcpus for p in plan.points), default=1)


def _loaded_calibration(plan: SweepPlan, datasets: dict[str, Dataset], alone: InstanceShape, vcpus: int,
                        budget_s: float | None = None) -> dict[str, Any]:
    """The same rate with `vcpus` vCPUs all decoding at once (see cpu-calibrate): what each vCPU of
    a loader with one worker per vCPU can give."""
    shape = InstanceShape(vcpus, alone.ram_gib, alone.disk_class)
    point = PlannedPoint(CALIBRATION_WORKLOAD, plan.profile, shape, {"parallel": vcpus})
    budget = budget_s if budget_s is not None else CALIBRATION_BUDGET_S.get(plan.profile, 10.0)
    run = measure_point(plan, point, datasets, memory_limit=False, time_budget_s=budget)
    loaded = run.result.extra.get("rate_per_vcpu_loaded")
    if run.result.status not in USABLE_STATUSES or not isinstance(loaded, (int, float)) or loaded <= 0:
        return {"loaded_status": run.result.status, "loaded_error": run.result.error}
    return {"ips_per_vcpu_loaded": float(loaded), "loaded_vcpus": int(run.result.extra.get("parallel", vcpus)),
            "loaded_spread": run.result.spread}


def loaded_rate(plan: SweepPlan, vcpus: int, budget_s: float | None = None) -> dict[str, Any]:
    """`vcpus` vCPUs decoding at once (`ips_per_vcpu_loaded`, `loaded_vcpus`, `loaded_spread`; or why not)."""
    return _loaded_calibration(plan, {}, alone_point(plan).shape, vcpus, budget_s)


def calibration_of_host(store: Store, host_id: int, plan: SweepPlan) -> dict[str, Any] | None:
    """The newest usable calibration that another sweep of this very host stored, covering this
    plan's largest vCPU count with its loaded figure: the CPUs have not changed, measuring again
    costs half a minute per sweep."""
    busy = _largest_vcpus(plan)
    cls = plan.classes.get(CALIBRATION_WORKLOAD)
    if cls is None:
        return None

    current_method = calibration_method(cls.defaults.get(plan.profile, {}))
    for row in reversed(store.sweeps()):
        cal = row.calibration or {}
        if row.host_id != host_id or not cal.get("ips_per_vcpu"):
            continue
        if cal.get("method", "") != current_method:
            continue  # measured another per-image work: the figures do not compare
        if busy > 1 and int(cal.get("loaded_vcpus") or 0) < busy:
            continue
        # Its timeline is that sweep's host, its adaptive record that sweep's choices: this sweep keeps its own.
        return {**{k: v for k, v in cal.items() if k not in ("timeline", "adaptive")}, "from_sweep": row.id}
    return None
