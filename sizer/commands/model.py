"""`sizer fit` and `sizer recommend`: the performance model and the instance it recommends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Iterable, Optional

import typer
from rich.table import Table

from sizer.catalog import load_catalog, normalize_gpu
from sizer.commands.options import (
    CatalogFiles,
    Confidence,
    DatasetGib,
    JobSamples,
    PointsInput,
    StoreInput,
    TargetCalibration,
    Tolerance,
    cloud_flag,
    cpu_cost_flag,
    disk_classes_flag,
    gpu_flag,
    json_flag,
    positive,
    target_calibration,
)
from sizer.commands.rank import render_ranking
from sizer.console import console, emit, print_table, styled
from sizer.diskclasses import load_disk_classes
from sizer.errors import NothingSized, SizerError
from sizer.fingerprint import HostFingerprint
from sizer.gpu_ranking import ANY_GPU, rank_workload
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE
from sizer.model import fit_points, group_points
from sizer.points import Point, combine_passes, unsized_reason
from sizer.report import load_inputs
from sizer.sizing import (
    Sizing,
    SizingTerms,
    measured_fingerprint,
    option_json,
    recommendation_json,
    size,
    sweep_host_speeds,
)

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
    """Points from exactly one of a store or a points.csv, as the report reads them (`load_inputs`)."""
    return load_inputs(store, input_file, disk_classes)["points"]


def _fit(points: list[Point], dataset_gib: float | None, table: dict[str, Any], cpu_cost: bool = False):
    """The fits of the points' workloads; none at all (every point failed) exits 3."""
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
    table = load_disk_classes(disk_classes)
    points = load_points(store, input_file, table)
    fits = _fit(points, dataset_gib, table, cpu_cost)
    data = {"workloads": [f.summary() for f in fits.values()]}
    emit(data, as_json, _render_fit)


# ---------------------------------------------------------------------------- sizer recommend
def sizing_dict(sizing: Sizing) -> dict[str, Any]:
    """`sizer recommend --json`'s entry of one workload: the recommendation (the report's form, with
    every option considered), the knee with its range and the RAM and disk it needs."""
    rec = sizing.recommendation
    if rec is None:
        return _unsized_dict(sizing.fit.workload, [], sizing.catalog_error or "the catalog could not be sized")
    disk_class, ram_gib = sizing.needs
    ceiling = rec.ceiling
    return {
        **recommendation_json(rec),
        "considered": [option_json(o, ceiling) for o in rec.considered],
        "knee": {"vcpus": sizing.knee, "low": sizing.knee_range.low, "high": sizing.knee_range.high,
                 "beyond_measured": sizing.knee_range.beyond_measured},
        # Which host measured, which CPU the answer is for, and the translation (sizer.fingerprint).
        "cpu": None if sizing.translation is None else sizing.translation.as_dict(),
        "needs": {"disk_class": disk_class, "ram_gib": ram_gib},
        "sized": True,
    }


def _recommend_any(points: list[Point], sweeps: list[Any], table: dict[str, Any], catalog: list[Path] | None,
                   cloud: list[str] | None, workload: list[str] | None, tolerance: float, confidence: float,
                   dataset_gib: float | None, job_samples: float | None,
                   target_cal: float | HostFingerprint | None, cpu_cost: bool, min_rate: float | None,
                   as_json: bool) -> None:
    """`--gpu any`: each workload's ranking of every GPU type (`sizer.commands.rank`)."""
    rows = load_catalog(tuple(catalog or ()), clouds=cloud, known_disks=table.keys())
    terms = SizingTerms(tuple(rows), ANY_GPU, table, tolerance, confidence, dataset_gib, job_samples,
                        target_cal, host_speeds=sweep_host_speeds(s.calibration for s in sweeps),
                        measured_host=measured_fingerprint(sweeps))
    fits = _fit(points, dataset_gib, table, cpu_cost)
    groups = _chosen_groups(group_points(combine_passes(points)), workload)
    rankings: list[dict[str, Any]] = []
    for name in sorted(groups):
        why = unsized_reason(groups[name]) or (None if name in fits else "no usable point")
        if why:
            rankings.append({"workload": name, "unit": groups[name][0].unit, "ranking": [], "reason": why})
            continue
        rankings.append(rank_workload(name, groups[name], fits[name], rows, terms, min_rate))
    data = {"gpu": ANY_GPU, "tolerance": tolerance, "confidence": confidence, "min_rate": min_rate,
            "rankings": rankings}
    emit(data, as_json, render_ranking)
    if not any(row["chosen"] for entry in rankings for row in entry["ranking"]):
        reasons = "; ".join(f"{entry['workload']}: {entry['reason'] or 'no GPU type meets the tolerance'}"
                            for entry in rankings)
        raise NothingSized(f"no workload could be sized on any GPU ({reasons})")


def _chosen_groups(groups: dict[str, list[Point]], workload: list[str] | None) -> dict[str, list[Point]]:
    """The groups `--workload` names (all where it names none); an unknown name is refused."""
    if not workload:
        return groups
    missing = [w for w in workload if w not in groups]
    if missing:
        raise SizerError(f"no workload {missing[0]!r} in the points (there: {', '.join(sorted(groups))})")
    return {w: groups[w] for w in workload}


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
        if rec.get("cpu"):
            console.print(f"  CPU: {rec['cpu']['words']}")
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
    gpu: Annotated[Optional[str], gpu_flag(
        "GPU model to size for (default: the measured GPU); 'any': every GPU type, ranked by cost per sample.")] = None,
    store: StoreInput = None,
    input_file: PointsInput = None,
    catalog: CatalogFiles = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    confidence: Confidence = DEFAULT_CONFIDENCE,
    dataset_gib: DatasetGib = None,
    job_samples: JobSamples = None,
    target_cpu: TargetCalibration = None,
    cloud: Annotated[Optional[list[str]], cloud_flag("Only these clouds; repeatable.")] = None,
    workload: Annotated[Optional[list[str]], typer.Option("--workload", help="Only these workloads; repeatable.")] = None,
    disk_classes: DiskCapsFile = None,
    cpu_cost: CpuCostFit = False,
    min_rate: Annotated[Optional[float], typer.Option(
        "--min-rate", callback=lambda v: positive(v, "--min-rate"),
        help="With --gpu any: leave out GPU types whose pick reads less than this (the unit's rate) at the "
             "pessimistic end: a job with a deadline is not sent to the cheapest slow card.")] = None,
    as_json: JsonTables = False,
) -> None:
    """Recommend the cheapest instance and disk class that keeps the GPU within tolerance of its ceiling.

    Every catalog row of the GPU model is predicted with every disk class it can use (a multi-GPU
    row by its per-GPU share); each cheaper row that falls short says what bound it. A workload
    without a usable measurement with real input gets no recommendation; when no workload has
    one, the exit code is 3.

    With --gpu any, every GPU type of the catalogs is ranked by cost per million samples: the
    measured GPU as measured, the others with the ceiling predicted from it (labelled predicted),
    each with its own vCPU, RAM and disk answer; a GPU type whose cards cannot hold the job's
    measured GPU memory is left out, with the reason.

    Examples:

      sizer recommend --store results/sizer.sqlite --gpu H100 --catalog my-prices.csv --job-samples 115.2e6

      sizer recommend --store results/sizer.sqlite --gpu any --min-rate 2000
    """
    if min_rate is not None and (gpu or "").strip().lower() != ANY_GPU:
        raise SizerError("--min-rate ranks GPU types: give it with --gpu any")
    target_cal = target_calibration(target_cpu)  # a bad file or rate is refused before any work
    table = load_disk_classes(disk_classes)
    inputs = load_inputs(store, input_file, table)
    points = inputs["points"]
    if (gpu or "").strip().lower() == ANY_GPU:
        _recommend_any(points, inputs["sweeps"], table, catalog, cloud, workload, tolerance, confidence, dataset_gib,
                       job_samples, target_cal, cpu_cost, min_rate, as_json)
        return
    measured = sorted({normalize_gpu(p.gpu_model) for p in points if p.gpu_model})
    target = gpu or (measured[0] if len(measured) == 1 else None)
    if not target:
        raise SizerError("give --gpu MODEL (the points do not name one GPU model)")
    rows = load_catalog(tuple(catalog or ()), clouds=cloud, gpu=target, known_disks=table.keys())
    if not rows:
        known = sorted({normalize_gpu(r.gpu) for r in load_catalog(tuple(catalog or ()), clouds=cloud)})
        raise SizerError(f"no catalog row has GPU {target!r} (known: {', '.join(known)})")
    terms = SizingTerms(tuple(rows), target, table, tolerance, confidence, dataset_gib, job_samples,
                        target_cal, host_speeds=sweep_host_speeds(s.calibration for s in inputs["sweeps"]),
                        measured_host=measured_fingerprint(inputs["sweeps"]))
    fits = _fit(points, dataset_gib, table, cpu_cost)
    groups = _chosen_groups(group_points(combine_passes(points)), workload)
    recs = []
    for name in sorted(groups):
        # A workload without a usable real-input measurement gets no recommendation, only its reason.
        why = unsized_reason(groups[name]) or (None if name in fits else "no usable point")
        if why:
            recs.append(_unsized_dict(name, groups[name], why))
            continue
        recs.append(sizing_dict(size(groups[name], fits[name], terms)))
    data = {"gpu": normalize_gpu(target), "tolerance": tolerance, "confidence": confidence, "recommendations": recs}
    emit(data, as_json, _render_recommend)
    if not any(rec["sized"] for rec in recs):
        reasons = "; ".join(f"{rec['workload']}: {rec['reason']}" for rec in recs)
        raise NothingSized(f"no workload could be sized ({reasons})")
