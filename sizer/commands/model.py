"""`sizer fit` and `sizer recommend`: the performance model and the instance it recommends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Iterable, Optional

import typer
from rich.table import Table

from sizer.commands.options import (
    CatalogFiles,
    Confidence,
    DatasetGib,
    JobSamples,
    PointsInput,
    StoreInput,
    Tolerance,
    cloud_flag,
    cpu_cost_flag,
    disk_classes_flag,
    finite,
    gpu_flag,
    json_flag,
)
from sizer.console import console, emit, print_table, styled
from sizer.errors import NothingSized, SizerError
from sizer.confidence import DEFAULT_CONFIDENCE, check_confidence
from sizer.points import Point, unsized_reason

# The options `fit` and `recommend` share with each other only.
DiskCapsFile = Annotated[
    Optional[Path], disk_classes_flag("Your own disk-class CSV (caps), added to the built-in one.")
]
JsonTables = Annotated[bool, json_flag("Print JSON instead of tables.")]
CpuCostFit = Annotated[
    bool,
    cpu_cost_flag("Fit on CPU-bound figures scaled by each window's CPU time per sample over the "
                  "median at its vCPU count: a shared host's changing speed taken out (needs --store)."),
]


# ---------------------------------------------------------------------------- inputs
def load_points(store: Path | None, input_file: Path | None, disk_classes: Iterable[str] | None = None) -> list[Point]:
    """Points from exactly one of a store or a points.csv, refused before any work when neither or
    both; a points.csv's disk classes must be among `disk_classes` (default: the built-in table)."""
    from sizer.points import read_points_csv
    from sizer.store import Store

    if store and input_file:
        raise SizerError("give either --store or --input, not both")
    if input_file:
        return read_points_csv(input_file, disk_classes)
    if not store:
        raise SizerError("give --store PATH (a sweep's store) or --input points.csv")
    points: list[Point] = []
    with Store(store, create=False) as opened:
        for sweep in opened.sweeps():
            for (_row, result), point in zip(opened.results(sweep.id), opened.points(sweep.id)):
                peak = (result.counters or {}).get("gpu_mem_peak_bytes")
                if isinstance(peak, (int, float)) and peak > 0:
                    point.extra["gpu_mem_peak_gib"] = float(peak) / 2**30
                points.append(point)
    if not points:
        raise SizerError(f"the store {store} holds no points yet (run `sizer sweep --store {store}`)")
    return points


def _fit(points: list[Point], dataset_gib: float | None, table: dict[str, Any], cpu_cost: bool = False):
    """The fits of the points' workloads; none at all (every point failed) exits 3."""
    from sizer.model import fit_points, group_points

    if dataset_gib is not None and dataset_gib <= 0:
        raise SizerError(f"--dataset-gib must be > 0, got {dataset_gib:g}")
    fits = fit_points(points, table, dataset_gib=dataset_gib, cpu_cost=cpu_cost)
    if not fits:
        reasons = "; ".join(f"{name}: {unsized_reason(group) or 'no usable point'}"
                            for name, group in sorted(group_points(points).items()))
        raise NothingSized(f"no workload could be fitted ({reasons})")
    return fits


def _num(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


# ---------------------------------------------------------------------------- sizer fit
def _render_fit(data: dict[str, Any]) -> None:
    for wl in data["workloads"]:
        loo = ("–" if wl["loo_median_ape"] is None
               else f"median {wl['loo_median_ape']:.1%}, max {wl['loo_max_ape']:.1%}")
        table = Table(title=f"{wl['workload']} ({wl['unit']}; {wl['n_points']} points; model {wl['model']}; "
                            f"leave-one-out error {loo})", title_justify="left")
        for column in ("parameter", "value", "95% interval", "unit", "source", "note"):
            table.add_column(column, justify="right" if column in ("value",) else "left",
                             no_wrap=column in ("parameter", "value", "95% interval"))
        for p in wl["params"].values():
            interval = "–" if p["low"] is None else f"{_num(p['low'])} – {_num(p['high'])}"
            table.add_row(p["name"], _num(p["value"]), interval, p["unit"], p["source"], p["note"])
        print_table(table, drop=("source", "unit"))
        for note in wl["notes"]:
            console.print(styled("  ", (note, "dim")))


def fit(
    store: StoreInput = None,
    input_file: PointsInput = None,
    dataset_gib: DatasetGib = None,
    disk_classes: DiskCapsFile = None,
    cpu_cost: CpuCostFit = False,
    as_json: JsonTables = False,
) -> None:
    """Fit the bottleneck model per workload: parameters with intervals and leave-one-out error.

    X = min(GPU ceiling, CPU term (Universal Scalability Law in vCPUs), disk bandwidth over uncached
    bytes per sample). Each parameter says whether it was measured, fitted or fixed.

    Example: sizer fit --store results/sizer.db --dataset-gib 140
    """
    from sizer.diskclasses import load_disk_classes

    table = load_disk_classes(disk_classes)
    points = load_points(store, input_file, table)
    fits = _fit(points, dataset_gib, table, cpu_cost)
    data = {"workloads": [f.summary() for f in fits.values()]}
    emit(data, as_json, _render_fit)


# ---------------------------------------------------------------------------- sizer recommend
def _option_dict(o: Any) -> dict[str, Any]:
    inst = o.instance
    return {
        "cloud": inst.cloud,
        "instance_type": inst.instance_type,
        "region": inst.region,
        "vcpus": inst.vcpus,
        "memory_gib": inst.memory_gib,
        "gpu": inst.gpu,
        "gpu_count": inst.gpu_count,
        "share_vcpus": o.share_vcpus,
        "share_memory_gib": o.share_memory_gib,
        "local_nvme_gib": inst.local_nvme_gib,
        "disk_class": o.disk_class,
        "disk_mbps": o.disk_mbps,
        "predicted": o.predicted,
        "bottleneck": o.bottleneck,
        "meets": o.meets,
        "price_per_hour": inst.price_per_hour,
        "price_per_gpu_hour": o.price_per_gpu_hour,
        "cost_per_million": o.cost_per_million,
        "job_hours": o.job_hours,
        "job_cost": o.job_cost,
        "price_source": inst.price_source,
        "price_date": inst.price_date,
        "reason": o.reason,
        "basis": o.basis,
        "model_predicted": o.model_predicted,
        "measured_shape": o.measured_shape or None,
        "share_pessimistic": o.share_pessimistic,
        "share_optimistic": o.share_optimistic,
        "meets_optimistic": o.meets_optimistic,
        "dataset_cached": o.dataset_cached,
    }


def recommendation_dict(rec: Any) -> dict[str, Any]:
    return {
        "workload": rec.workload,
        "unit": rec.unit,
        "gpu": rec.gpu,
        "ceiling": rec.ceiling,
        "tolerance": rec.tolerance,
        "chosen": _option_dict(rec.chosen) if rec.chosen else None,
        "closest": _option_dict(rec.closest) if rec.closest else None,
        "rejected_cheaper": [_option_dict(o) for o in rec.rejected_cheaper],
        "considered": [_option_dict(o) for o in rec.considered],
        "saving_vs_largest": rec.saving_vs_largest,
        "needs_local_nvme": rec.needs_local_nvme,
        "reason": rec.reason,
        "notes": rec.notes,
        "sized": True,
        "confidence": rec.confidence,
        "model_trusted": rec.model_trusted,
        "optimistic": _option_dict(rec.optimistic) if rec.optimistic else None,
        "disagreements": rec.disagreements,
    }


def _unsized_dict(name: str, points: list[Point], why: str) -> dict[str, Any]:
    """A workload its points cannot size: no recommendation, and the reason."""
    return {
        "workload": name, "unit": points[0].unit if points else "", "gpu": None, "ceiling": None, "tolerance": None,
        "chosen": None, "closest": None, "rejected_cheaper": [], "considered": [], "saving_vs_largest": None,
        "needs_local_nvme": False, "reason": why, "notes": [], "sized": False,
    }


def _job_text(hours: float | None, cost: float | None) -> str:
    if hours is None:
        return "–"
    return f"{hours:.3g} h, ${cost:,.2f}" if cost is not None else f"{hours:.3g} h"


def _saving_text(saving: dict[str, Any]) -> str:
    """The choice against the largest shape of its family, per GPU-hour (prices in whole cents)."""
    largest = f"{saving['instance_type']} ({saving['basis']})"
    if saving["saving_per_hour"] > 0:
        return f"saves ${saving['saving_per_hour']:,.2f}/GPU-hour ({saving['saving_fraction']:.0%}) against {largest}"
    if saving["saving_per_hour"] < 0:
        return f"{largest} costs ${-saving['saving_per_hour']:,.2f}/GPU-hour less and falls short"
    return f"costs the same per GPU-hour as {largest}"


def _low_end_text(option: dict[str, Any], rec: dict[str, Any]) -> str:
    """An option's share of the ceiling at both ends of its range, where they differ."""
    low, high = option.get("share_pessimistic"), option.get("share_optimistic")
    if low is None or high is None or f"{low:.0%}" == f"{high:.0%}":
        return ""
    return f" ({min(low, high):.0%} to {max(low, high):.0%} of the ceiling at {rec['confidence']:.0%} confidence)"


def _render_recommend(data: dict[str, Any]) -> None:
    table = Table(title=f"cheapest {data['gpu']} instance within {data['tolerance']:.0%} of the GPU ceiling",
                  title_justify="left")
    for column in ("workload", "instance", "disk", "predicted", "of ceiling", "$/GPU-hour", "$/million", "job"):
        table.add_column(column, justify="left" if column in ("workload", "instance", "disk") else "right",
                         no_wrap=column in ("of ceiling", "$/GPU-hour", "$/million"))
    for rec in data["recommendations"]:
        c = rec["chosen"]
        if c is None:
            table.add_row(rec["workload"], styled(("none", "yellow")), "", "", "", "", "", "")
            continue
        job = _job_text(c["job_hours"], c["job_cost"])
        table.add_row(
            rec["workload"],
            f"{c['instance_type']} ({c['cloud']})" + (f" 1/{c['gpu_count']}" if c["gpu_count"] > 1 else ""),
            c["disk_class"],
            f"{_num(c['predicted'])} {rec['unit']}",
            f"{c['predicted'] / rec['ceiling']:.0%}",
            f"${c['price_per_gpu_hour']:,.3f}",
            "–" if c["cost_per_million"] is None else f"${c['cost_per_million']:,.3f}",
            job,
        )
    print_table(table, drop=("job", "$/million", "of ceiling"))
    for rec in data["recommendations"]:
        console.print(styled((rec["workload"], "bold"), f": {rec['reason']}"))
        for o in rec["rejected_cheaper"]:
            console.print(f"  rejected {o['instance_type']} ({o['cloud']}, ${o['price_per_gpu_hour']:,.3f}/GPU-hour): "
                          f"{o['bottleneck']}-bound, {_num(o['predicted'])} {rec['unit']}{_low_end_text(o, rec)}")
        optimistic = rec.get("optimistic")
        if optimistic:
            console.print(f"  at the optimistic end of the {rec['confidence']:.0%} ranges: {optimistic['instance_type']} "
                          f"({optimistic['cloud']}) with {optimistic['disk_class']}, "
                          f"${optimistic['price_per_gpu_hour']:,.3f}/GPU-hour{_low_end_text(optimistic, rec)}")
        saving = rec["saving_vs_largest"]
        if saving:
            console.print(f"  {_saving_text(saving)}")
        if rec["needs_local_nvme"]:
            console.print("  needs local NVMe: only instances with it reach the ceiling")
        for note in rec["notes"]:
            console.print(styled("  ", (note, "dim")))


def recommend(
    gpu: Annotated[Optional[str], gpu_flag("GPU model to size for (default: the measured GPU).")] = None,
    store: StoreInput = None,
    input_file: PointsInput = None,
    catalog: CatalogFiles = None,
    tolerance: Tolerance = 0.05,
    confidence: Confidence = DEFAULT_CONFIDENCE,
    dataset_gib: DatasetGib = None,
    job_samples: JobSamples = None,
    target_calibration: Annotated[
        Optional[float],
        typer.Option("--target-calibration", callback=finite,
                     help="Per-vCPU calibration (images/s) of the target's CPU model (`sizer probe`); scales the CPU term."),
    ] = None,
    cloud: Annotated[Optional[list[str]], cloud_flag("Only these clouds; repeatable.")] = None,
    workload: Annotated[Optional[list[str]], typer.Option("--workload", help="Only these workloads; repeatable.")] = None,
    disk_classes: DiskCapsFile = None,
    cpu_cost: CpuCostFit = False,
    as_json: JsonTables = False,
) -> None:
    """Recommend the cheapest instance and disk class that keeps the GPU within tolerance of its ceiling.

    Every catalog row of the GPU model is predicted with every disk class it can use (a multi-GPU
    row by its per-GPU share); each cheaper row that falls short says what bound it. A workload
    without a usable measurement with real input gets no recommendation; when no workload has
    one, the exit code is 3.

    Example: sizer recommend --store results/sizer.db --gpu H100 --catalog my-prices.csv --job-samples 115.2e6
    """
    from sizer.catalog import load_catalog, normalize_gpu
    from sizer.model import cpu_scale
    from sizer.recommend import recommend as recommend_one

    if not 0 < tolerance < 1:
        raise SizerError(f"--tolerance must be a fraction between 0 and 1 (for example 0.05), got {tolerance:g}")
    check_confidence(confidence, "--confidence")
    if job_samples is not None and job_samples <= 0:
        raise SizerError(f"--job-samples must be > 0, got {job_samples:g}")
    if target_calibration is not None and target_calibration <= 0:
        raise SizerError(f"--target-calibration must be > 0, got {target_calibration:g}")
    from sizer.diskclasses import load_disk_classes
    from sizer.model import group_points

    table = load_disk_classes(disk_classes)
    points = load_points(store, input_file, table)
    measured = sorted({normalize_gpu(p.gpu_model) for p in points if p.gpu_model})
    target = gpu or (measured[0] if len(measured) == 1 else None)
    if not target:
        raise SizerError("give --gpu MODEL (the points do not name one GPU model)")
    rows = load_catalog(tuple(catalog or ()), clouds=cloud, gpu=target, known_disks=table.keys())
    if not rows:
        known = sorted({normalize_gpu(r.gpu) for r in load_catalog(tuple(catalog or ()), clouds=cloud)})
        raise SizerError(f"no catalog row has GPU {target!r} (known: {', '.join(known)})")
    fits = _fit(points, dataset_gib, table, cpu_cost)
    groups = group_points(points)
    if workload:
        missing = [w for w in workload if w not in groups]
        if missing:
            raise SizerError(f"no workload {missing[0]!r} in the points (there: {', '.join(sorted(groups))})")
        groups = {w: groups[w] for w in workload}
    recs = []
    for name in sorted(groups):
        # A workload without a usable real-input measurement gets no recommendation, only its reason.
        why = unsized_reason(groups[name]) or (None if name in fits else "no usable point")
        if why:
            recs.append(_unsized_dict(name, groups[name], why))
            continue
        scale = cpu_scale(fits[name].calibration_ips, target_calibration)
        rec = recommend_one(fits[name], rows, target, tolerance=tolerance, disk_classes=table,
                            job_samples=job_samples, cpu_scale=scale, confidence=confidence)
        recs.append(recommendation_dict(rec))
    data = {"gpu": normalize_gpu(target), "tolerance": tolerance, "confidence": confidence, "recommendations": recs}
    emit(data, as_json, _render_recommend)
    if not any(rec["sized"] for rec in recs):
        reasons = "; ".join(f"{rec['workload']}: {rec['reason']}" for rec in recs)
        raise NothingSized(f"no workload could be sized ({reasons})")
