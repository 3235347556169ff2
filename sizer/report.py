"""The report: a plain, tested context built from points and fits, then rendered.

`build_context` turns measured points (and, from a store, the sweeps and the limits that were
enforced) into JSON-able data: per workload the recommendation and its reason, the vCPU knee, the
disk class and RAM the workload needs, the model's parameters and error, measured vs fitted
points, the catalog rows considered; then host metadata, limits, calibration, the profile that ran
and the command to reproduce. `write_outputs` writes that context as `results.json`, renders it
through `reports/templates/report.html.j2` into one self-contained `report.html`, and writes the
points as `points.csv`. Every figure in the report comes from a point or a fit.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import statistics
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from sizer import __version__
from sizer.errors import SizerError
from sizer.points import Point, combine_passes, write_points_csv

RESULTS_SCHEMA_VERSION = 1
DEFAULT_TARGET_GPU = "H100"
CPU_SMALL = "cpu-small"
SYNTHETIC_INPUT = "synthetic"
_CURVE_POINTS = 60


# ---------------------------------------------------------------------------- small readers
def sweep_calibration_ips(calibration: dict[str, Any] | None) -> float | None:
    """The per-vCPU decode-and-augment rate (images/s) recorded with a sweep (`sizer.sweep.calibrate`)."""
    if not calibration:
        return None
    for key in ("ips_per_vcpu", "calibration_ips"):
        value = calibration.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def host_gpu_names(host: dict[str, Any] | None) -> list[str]:
    host = host or {}
    gpu = host.get("gpu") if isinstance(host.get("gpu"), dict) else {}
    names = [str(d.get("name")) for d in gpu.get("devices", []) if d.get("name")]
    return names or [str(g) for g in host.get("gpus") or [] if g]


def _jsonable(value: Any) -> Any:
    """Dataclasses, tuples, paths and numpy scalars as plain JSON data; NaN and inf as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _round(value: float | None, digits: int = 4) -> float | None:
    if value is None:
        return None
    return float(f"{value:.{digits}g}")


# ---------------------------------------------------------------------------- model access
def _predict(fit: Any, vcpus: float, ram_gib: float, disk_mbps: float | None) -> float | None:
    try:
        value = fit.predict(vcpus, ram_gib, disk_mbps).throughput
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return _num(value)


def _ceiling(fit: Any) -> float | None:
    param = fit.params.get("gpu_ceiling")
    return _num(param.value) if param is not None else None


# ---------------------------------------------------------------------------- per-workload parts
def _point_row(p: Point, predicted: float | None) -> dict[str, Any]:
    error = None
    if predicted is not None and p.usable and p.throughput > 0:
        error = (predicted - p.throughput) / p.throughput
    return {
        "vcpus": p.vcpus,
        "ram_gib": p.ram_gib,
        "disk_class": p.disk_class,
        "decode": p.decode,
        "input": p.input,
        "profile": p.profile,
        "status": p.status,
        "usable": p.usable,
        "measured": p.throughput,
        "predicted": _round(predicted, 6),
        "error": _round(error, 4),
        "spread": p.spread,
        "bottleneck": p.bottleneck,
        "gpu_util_pct": p.gpu_util_pct,
        "read_mb_per_sample": p.read_mb_per_sample,
        "pass_rates": p.extra.get("pass_rates"),  # every measurement of the shape, when more than one
    }


def _residual_map(fit: Any) -> dict[int, float]:
    return {id(point): float(predicted) for point, predicted in (fit.residuals or [])}


def _match_predicted(p: Point, fit: Any, residuals: dict[int, float], fitted: list[tuple[Point, float]]) -> float | None:
    if id(p) in residuals:
        return residuals[id(p)]
    for point, predicted in fitted:  # the model may have copied the points
        if (point.vcpus, point.ram_gib, point.disk_class, point.decode, point.input, point.throughput) == (
            p.vcpus,
            p.ram_gib,
            p.disk_class,
            p.decode,
            p.input,
            p.throughput,
        ):
            return float(predicted)
    return None


def vcpu_knee(points: Sequence[Point], ceiling: float | None, tolerance: float,
              ceiling_name: str = "ceiling") -> list[dict[str, Any]]:
    """Fewest measured vCPUs within `tolerance` of the ceiling, per decode mode.

    `ceiling_name` is what the fit calls its ceiling ("GPU ceiling" only where it was measured with
    input on the device), so the knee's sentence says which one it is.

    For each vCPU count the best measured rate over disk classes and RAM sizes is taken (the knee
    is about vCPUs; disk and RAM have their own answer). `knee_vcpus` is None when no measured
    count reaches the bound; the best measured share of the ceiling says how close it came.
    """
    out = []
    # Synthetic-input points measure the GPU alone, not the input pipeline the knee is about.
    usable = [p for p in points if p.usable and p.input != SYNTHETIC_INPUT]
    for decode in sorted({p.decode for p in usable}):
        best: dict[int, Point] = {}
        for p in usable:
            if p.decode == decode and (p.vcpus not in best or p.throughput > best[p.vcpus].throughput):
                best[p.vcpus] = p
        if not best:
            continue
        top = max(best.values(), key=lambda p: p.throughput)
        reference = ceiling or top.throughput
        bound = (1.0 - tolerance) * reference
        knee = next((v for v in sorted(best) if best[v].throughput >= bound), None)
        out.append(
            {
                "decode": decode,
                "ceiling": reference,
                "ceiling_source": f"the {ceiling_name}" if ceiling else "best measured rate",
                "bound": bound,
                "knee_vcpus": knee,
                "knee_throughput": best[knee].throughput if knee is not None else None,
                "best_vcpus": top.vcpus,
                "best_throughput": top.throughput,
                "best_fraction": top.throughput / reference if reference else None,
                "measured_vcpus": sorted(best),
                "by_vcpus": [{"vcpus": v, "throughput": best[v].throughput} for v in sorted(best)],
            }
        )
    return out


def predicted_knee(fit: Any, ceiling: float | None, tolerance: float, ram_gib: float, disk_mbps: float | None,
                   max_vcpus: int) -> int | None:
    """Fewest vCPUs the model predicts within `tolerance` of the ceiling (ample RAM, fastest disk)."""
    if not ceiling:
        return None
    for v in range(1, max_vcpus + 1):
        x = _predict(fit, v, ram_gib, disk_mbps)
        if x is not None and x >= (1.0 - tolerance) * ceiling:
            return v
    return None


def _ram_grid(low: float, high: float) -> list[float]:
    step = max(0.25, round((high - low) / 200 / 0.25) * 0.25)
    grid, r = [], max(step, low)
    while r <= high + 1e-9:
        grid.append(round(r, 2))
        r += step
    return grid


def out_of_memory(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Per RAM size, the fewest vCPUs at which a measured shape was killed by the memory limit: a
    measured bound beside the model's single footprint (loader workers each add to it)."""
    least: dict[float, int] = {}
    for p in points:
        if p.status == "oom":
            least[p.ram_gib] = min(least.get(p.ram_gib, p.vcpus), p.vcpus)
    return [{"ram_gib": ram, "from_vcpus": least[ram]} for ram in sorted(least)]


def ram_needs(fit: Any, ceiling: float | None, tolerance: float, vcpus: int, disks: dict[str, float | None],
              ram_high: float) -> list[dict[str, Any]]:
    """Per disk class, the least RAM (GiB) at which the model keeps the workload within tolerance."""
    if not ceiling:
        return []
    out = []
    grid = _ram_grid(0.0, ram_high)
    for name, mbps in disks.items():
        least = None
        for r in grid:
            x = _predict(fit, vcpus, r, mbps)
            if x is not None and x >= (1.0 - tolerance) * ceiling:
                least = r
                break
        at_high = _predict(fit, vcpus, ram_high, mbps)
        out.append(
            {
                "disk_class": name,
                "disk_mbps": mbps,
                "min_ram_gib": least,
                "predicted_at_max_ram": _round(at_high, 6),
                "fraction_at_max_ram": _round(at_high / ceiling, 4) if at_high is not None else None,
                "searched_up_to_gib": ram_high,
            }
        )
    return out


def _curves(fit: Any, points: Sequence[Point], disks: dict[str, float | None], ram_high: float) -> dict[str, Any]:
    usable = [p for p in points if p.usable]
    if not usable:
        return {}
    ram_at = max(p.ram_gib for p in usable)
    v_max = max(p.vcpus for p in usable)
    v_top = max(v_max + 1, math.ceil(v_max * 1.25))
    vcpus = list(range(1, v_top + 1)) if v_top <= _CURVE_POINTS else [
        round(1 + i * (v_top - 1) / (_CURVE_POINTS - 1), 2) for i in range(_CURVE_POINTS)
    ]
    ram_top = max(ram_high, ram_at * 1.15)
    rams = [round(ram_top * (i + 1) / _CURVE_POINTS, 3) for i in range(_CURVE_POINTS)]
    return {
        "vcpu": {
            "ram_gib": ram_at,
            "vcpus": vcpus,
            "by_disk": {d: [_round(_predict(fit, v, ram_at, mbps), 6) for v in vcpus] for d, mbps in disks.items()},
        },
        "ram": {
            "vcpus": v_max,
            "ram_gib": rams,
            "by_disk": {d: [_round(_predict(fit, v_max, r, mbps), 6) for r in rams] for d, mbps in disks.items()},
        },
    }


def _option(option: Any, ceiling: float | None) -> dict[str, Any]:
    inst = option.instance
    predicted = _num(option.predicted)
    return {
        "cloud": inst.cloud,
        "instance_type": inst.instance_type,
        "region": inst.region,
        "vcpus": inst.vcpus,
        "memory_gib": inst.memory_gib,
        "gpu": inst.gpu,
        "gpu_count": inst.gpu_count,
        "gpu_memory_gib": inst.gpu_memory_gib,
        "local_nvme_gib": inst.local_nvme_gib,
        "price_per_hour": _num(inst.price_per_hour),
        # A multi-GPU row is sized and priced by its per-GPU share (what one GPU's workload gets).
        "price_per_gpu_hour": _num(getattr(option, "price_per_gpu_hour", None)),
        "share_vcpus": _num(getattr(option, "share_vcpus", None)) or inst.vcpus,
        "share_memory_gib": _num(getattr(option, "share_memory_gib", None)) or inst.memory_gib,
        "disk_mbps": _num(getattr(option, "disk_mbps", None)),
        "price_source": inst.price_source,
        "price_date": inst.price_date,
        "disk_class": option.disk_class,
        "predicted": _round(predicted, 6),
        "fraction_of_ceiling": _round(predicted / ceiling, 4) if predicted is not None and ceiling else None,
        "bottleneck": option.bottleneck,
        "meets": bool(option.meets),
        "cost_per_million": _num(option.cost_per_million),
        "job_hours": _num(option.job_hours),
        "job_cost": _num(option.job_cost),
        "reason": option.reason,
    }


def _recommendation(rec: Any) -> dict[str, Any]:
    ceiling = _num(rec.ceiling)
    closest = getattr(rec, "closest", None)
    return {
        "gpu": rec.gpu,
        "ceiling": ceiling,
        "ceiling_name": getattr(rec, "ceiling_name", "GPU ceiling"),
        "tolerance": rec.tolerance,
        "chosen": _option(rec.chosen, ceiling) if rec.chosen is not None else None,
        "closest": _option(closest, ceiling) if closest is not None else None,
        "notes": list(getattr(rec, "notes", []) or []),
        "rejected_cheaper": [_option(o, ceiling) for o in rec.rejected_cheaper],
        "considered_count": len(rec.considered),
        "saving_vs_largest": _jsonable(rec.saving_vs_largest),
        "reason": rec.reason,
        "needs_local_nvme": bool(rec.needs_local_nvme),
    }


def _summary_sentence(name: str, unit: str, rec: dict[str, Any] | None, why_none: str | None) -> str:
    """The recommendation in plain words, from the figures alone."""
    if rec is None or rec["chosen"] is None:
        return f"No instance is recommended for {name}: {why_none or (rec or {}).get('reason') or 'no catalog row meets the bound'}."
    c = rec["chosen"]
    parts = [
        f"Choose {c['instance_type']} ({c['cloud']}, {c['region']}) with {c['disk_class']} storage.",
        f"The model predicts {c['predicted']:,.0f} {unit}"
        + (f", {c['fraction_of_ceiling']:.0%} of the {rec.get('ceiling_name', 'GPU ceiling')} ({rec['ceiling']:,.0f} {unit})."
           if c.get("fraction_of_ceiling") is not None else "."),
    ]
    if c.get("price_per_gpu_hour") is not None:
        per = " per GPU" if c.get("gpu_count", 1) > 1 else ""
        parts.append(f"It costs ${c['price_per_gpu_hour']:,.2f} an hour{per}" + (
            f", ${c['cost_per_million']:,.2f} per million samples." if c.get("cost_per_million") is not None else "."))
    rejected = rec["rejected_cheaper"]
    if rejected:
        reasons = Counter(o["bottleneck"] or "below the bound" for o in rejected)
        why = ", ".join(f"{n} by {b}" for b, n in reasons.most_common())
        parts.append(f"{len(rejected)} cheaper option(s) would slow the GPU ({why}).")
    return " ".join(parts)


# ---------------------------------------------------------------------------- host, limits, profile
def _host_summary(host_id: int, host: dict[str, Any]) -> dict[str, Any]:
    cpu = host.get("cpu") or {}
    memory = host.get("memory") or {}
    gpu = host.get("gpu") or {}
    frameworks = host.get("frameworks") or {}
    limits = host.get("limits") or {}
    path = host.get("path") or {}
    device = path.get("device") or {}
    return {
        "id": host_id,
        "hostname": host.get("hostname"),
        "cpu_model": cpu.get("model") or host.get("cpu_model"),
        "hardware_threads": cpu.get("hardware_threads") or host.get("threads"),
        "physical_cores": cpu.get("physical_cores"),
        "smt": cpu.get("smt"),
        "memory_gib": memory.get("total_gib"),
        "gpus": host_gpu_names(host),
        "gpu_driver": gpu.get("driver"),
        "gpu_note": gpu.get("reason"),
        "kernel": host.get("kernel"),
        "os": host.get("os"),
        "frameworks": {k: (v or {}).get("version") for k, v in frameworks.items() if isinstance(v, dict)},
        "limit_backend": limits.get("backend"),
        "limit_controllers": limits.get("writable"),
        "limit_placement": limits.get("placement"),
        "limit_notes": limits.get("notes") or [],
        "dataset_disk": {
            "path": path.get("path"),
            "fstype": path.get("fstype"),
            "device": device.get("name"),
            "rotational": device.get("rotational"),
        } if path else None,
        "disk_probe": host.get("disk_probe") or host.get("fio"),
    }


def _limits(enforcement: Sequence[dict[str, Any]] | None, hosts: list[dict[str, Any]]) -> dict[str, Any]:
    """How each limit was enforced: one row per shape and enforcement record (repeats counted)."""
    if not enforcement:
        return {
            "recorded": False,
            "backends": sorted({h["limit_backend"] for h in hosts if h.get("limit_backend")}),
            "rows": [],
            "note": "These points carry no record of how their limits were enforced (imported from a points file).",
        }
    groups: dict[tuple, dict[str, Any]] = {}
    for row in enforcement:
        key = (row.get("workload"), row.get("vcpus"), row.get("ram_gib"), row.get("disk_class"), row.get("backend"),
               str(row.get("cpus", "")), str(row.get("memory", "")), str(row.get("disk", "")))
        entry = groups.setdefault(
            key,
            {
                "workload": row.get("workload"),
                "vcpus": row.get("vcpus"),
                "ram_gib": row.get("ram_gib"),
                "disk_class": row.get("disk_class"),
                "backend": str(row.get("backend") or ""),
                "cpus": str(row.get("cpus") or ""),
                "memory": str(row.get("memory") or ""),
                "disk": str(row.get("disk") or ""),
                "points": 0,
            },
        )
        entry["points"] += 1
    rows = sorted(
        groups.values(),
        key=lambda r: (str(r["workload"]), _disk_order(str(r["disk_class"])), r["ram_gib"] or 0, r["vcpus"] or 0,
                       str(r["cpus"]), str(r["memory"]), str(r["disk"])),
    )
    not_enforced = sorted({
        what for r in enforcement for what in ("memory", "disk") if "not enforced" in str(r.get(what, ""))
    })
    note = "Every limit was enforced by the kernel." if not not_enforced else (
        f"Not enforced on some points: {', '.join(not_enforced)} (the affinity-only backend cannot limit them); "
        "those points measured the host's full RAM or disk."
    )
    return {
        "recorded": True,
        "backends": sorted({str(r.get("backend")) for r in enforcement if r.get("backend")}),
        "rows": rows,
        "not_enforced": not_enforced,
        "note": note,
    }


def _profile(points: Sequence[Point], host_gpus: list[str], target_gpu: str) -> dict[str, Any]:
    profiles = sorted({p.profile for p in points if p.profile})
    no_gpu = not host_gpus
    cpu_small_without_gpu = no_gpu and (CPU_SMALL in profiles or not profiles)
    if cpu_small_without_gpu:
        note = (
            f"These figures come from the {CPU_SMALL} profile on a host without a GPU: small models and images, "
            "with the part a GPU would do computed on the CPU. They show how sizer measures and decides; "
            f"they do not size a real {target_gpu} host. Run `sizer sweep` on a host with the GPU to size it."
        )
    elif no_gpu:
        note = "The measured host had no GPU; the figures describe that host's CPU and disks only."
    else:
        note = f"Measured on {', '.join(sorted(set(host_gpus)))} with the {', '.join(profiles) or 'default'} profile."
    return {
        "profiles": profiles,
        "host_has_gpu": not no_gpu,
        "cpu_small_without_gpu": cpu_small_without_gpu,
        "note": note,
    }


# ---------------------------------------------------------------------------- the context
def build_context(
    points: Sequence[Point],
    *,
    sweeps: Sequence[Any] = (),
    gpu: str | None = None,
    tolerance: float = 0.05,
    catalog_files: Sequence[str | Path] = (),
    dataset_gib: float | None = None,
    job_samples: float | None = None,
    command: str = "",
    enforcement: Sequence[dict[str, Any]] | None = None,
    disk_classes: dict[str, Any] | None = None,
    source: str = "",
    cpu_cost: bool = False,
) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data (results.json is this, versioned).

    `cpu_cost`: the model is fitted on CPU-bound figures with each window's CPU time per sample taken
    out (`sizer.model.take_out_cpu_cost`); the points shown stay as measured."""
    from sizer.catalog import load_catalog, normalize_gpu
    from sizer.diskclasses import load_disk_classes
    from sizer.model import fit_points, group_points
    from sizer.recommend import recommend

    measured = list(points)
    points = combine_passes(measured)  # one figure per shape: the median of its passes
    if not points:
        raise SizerError("no points to report (measure some with `sizer sweep`, or give --input points.csv)")
    if not 0 < tolerance < 1:
        raise SizerError(f"tolerance must be a fraction between 0 and 1 (for example 0.05), got {tolerance:g}")
    if dataset_gib is not None and dataset_gib <= 0:
        raise SizerError(f"--dataset-gib must be > 0, got {dataset_gib:g}")
    disk_classes = disk_classes if disk_classes is not None else load_disk_classes()

    hosts: dict[int, dict[str, Any]] = {}
    for s in sweeps:
        hosts.setdefault(s.host_id, _host_summary(s.host_id, s.host))
    host_list = list(hosts.values())
    host_gpus = [g for h in host_list for g in h["gpus"]] + [p.gpu_model for p in points if p.gpu_model]

    if gpu:
        target, target_source = normalize_gpu(gpu), "--gpu"
    elif host_gpus:
        target, target_source = normalize_gpu(Counter(host_gpus).most_common(1)[0][0]), "measured host"
    else:
        target, target_source = DEFAULT_TARGET_GPU, "default (the measured host has no GPU)"
    profile = _profile(points, host_gpus, target)
    illustrative = not host_gpus

    catalog = load_catalog(user_files=tuple(catalog_files), builtin=True, gpu=target)
    if not catalog and gpu:
        known = sorted({normalize_gpu(r.gpu) for r in load_catalog(user_files=tuple(catalog_files))})
        raise SizerError(f"no catalog row has GPU {gpu!r} (known: {', '.join(known)})")

    # Every measurement: the fit takes each shape at the median of its passes, after --cpu-cost's scaling.
    fits = fit_points(measured, disk_classes, dataset_gib=dataset_gib, cpu_cost=cpu_cost)
    # One report entry per fitted workload: a workload measured with several decode modes (or
    # inputs, or profiles) is fitted, and so reported, once per variant.
    by_workload = group_points(points)

    workloads = []
    for name in sorted(by_workload):
        wl_points = by_workload[name]
        fit = fits.get(name)
        workloads.append(
            _workload_context(name, wl_points, fit, catalog, target, tolerance, disk_classes, dataset_gib,
                              job_samples, recommend, cpu_cost)
        )

    sweeps_ctx = [
        {
            "id": s.id,
            "host_id": s.host_id,
            "command": s.command,
            "config": s.config,
            "calibration": s.calibration,
            "started": _iso(s.started),
            "finished": _iso(s.finished),
        }
        for s in sweeps
    ]
    calib_points = [p.calibration_ips for p in points if p.calibration_ips]
    calib_sweeps = [v for v in (sweep_calibration_ips(s.calibration) for s in sweeps) if v]
    calibration = {
        "ips_per_vcpu": _round(statistics.median(calib_points or calib_sweeps), 6) if (calib_points or calib_sweeps) else None,
        "source": "points" if calib_points else ("sweep calibration" if calib_sweeps else None),
        "per_sweep": [{"sweep": s.id, **(s.calibration or {})} for s in sweeps if s.calibration],
        "note": (
            "One vCPU's JPEG decode-and-augment rate on this host. Another CPU model scales the CPU-bound "
            "figures by the ratio of its calibration to this one."
        ),
    }
    clouds = Counter((r.cloud, r.price_source, r.price_date) for r in catalog)
    return _jsonable({
        "schema_version": RESULTS_SCHEMA_VERSION,
        "sizer_version": __version__,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "source": source,
        "target": {
            "gpu": target,
            "source": target_source,
            "host_gpus": sorted(set(host_gpus)),
            "illustrative": illustrative,
        },
        "profile": profile,
        "tolerance": tolerance,
        "dataset_gib": dataset_gib,
        "job_samples": job_samples,
        "cpu_cost": cpu_cost,
        "workloads": workloads,
        "catalog": {
            "files": [str(f) for f in catalog_files],
            "rows_for_target": len(catalog),
            "sources": [
                {"cloud": cloud, "price_source": src, "price_date": date, "rows": n}
                for (cloud, src, date), n in sorted(clouds.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
            ],
        },
        "hosts": host_list,
        "sweeps": sweeps_ctx,
        "limits": _limits(enforcement, host_list),
        "calibration": calibration,
        "disk_classes": [
            {"name": d.name, "read_mbps": d.read_mbps, "read_iops": d.read_iops, "description": d.description}
            for d in disk_classes.values()
        ],
        "reproduce": {
            "command": command,
            "sweep_commands": sorted({s.command for s in sweeps if s.command}),
        },
    })


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).replace(microsecond=0).isoformat()


def _workload_context(name, points, fit, catalog, target, tolerance, disk_classes, dataset_gib, job_samples,
                      recommend, cpu_cost=False) -> dict[str, Any]:
    usable = [p for p in points if p.usable]
    units = Counter(p.unit for p in points)
    unit = fit.unit if fit is not None else units.most_common(1)[0][0]
    disks_measured = sorted({p.disk_class for p in points}, key=_disk_order)
    ctx: dict[str, Any] = {
        "workload": name,
        "unit": unit,
        "profiles": sorted({p.profile for p in points if p.profile}),
        "n_points": len(points),
        "n_usable": len(usable),
        "statuses": dict(Counter(p.status for p in points)),
        "disk_classes": disks_measured,
        "decodes": sorted({p.decode for p in usable if p.input != SYNTHETIC_INPUT}),
        "fitted": fit is not None,
    }
    ctx["warnings"] = quality_warnings(points, fit, cpu_cost)
    ctx["n_noisy"] = sum(1 for p in usable if p.status == "noisy")
    if fit is None:
        ctx.update(
            ceiling=None,
            ceiling_name="ceiling",
            ceiling_how=None,
            recommendation=None,
            no_recommendation=f"too few usable points to fit a model ({len(usable)} of {len(points)})",
            knee={"tolerance": tolerance, "by_decode": vcpu_knee(points, None, tolerance), "predicted_vcpus": None},
            needs={"by_disk": [], "disk_class": None, "ram_gib": None, "out_of_memory": out_of_memory(points)},
            model=None,
            points=[_point_row(p, None) for p in points],
            curves={},
            catalog_rows=[],
        )
        ctx["summary"] = _summary_sentence(name, unit, None, ctx["no_recommendation"])
        return ctx

    ceiling = _ceiling(fit)
    disks = {d: fit.disk_mbps(d) for d in disks_measured}
    fastest = max(disks.values(), key=lambda m: math.inf if m is None else m) if disks else None
    max_ram = max((p.ram_gib for p in usable), default=1.0)
    footprint = _num(getattr(fit.params.get("footprint_gib"), "value", None)) or 0.0
    ram_high = max(max_ram, (dataset_gib or 0.0) + footprint) * 2
    v_max = max((p.vcpus for p in usable), default=1)
    knee_pred = predicted_knee(fit, ceiling, tolerance, ram_high, fastest, max(v_max * 4, 64))
    by_disk = ram_needs(fit, ceiling, tolerance, knee_pred or v_max, disks, ram_high)

    recommendation, why_none = None, None
    try:
        rec = recommend(fit, catalog, target, tolerance=tolerance, disk_classes=disk_classes, job_samples=job_samples)
        recommendation = _recommendation(rec)
        if rec.chosen is None:
            why_none = rec.reason
        considered = [_option(o, _num(rec.ceiling)) for o in rec.considered]
    except SizerError as exc:
        why_none, considered = str(exc), []
    considered.sort(key=lambda o: (o["price_per_gpu_hour"] is None, o["price_per_gpu_hour"] or 0, o["cloud"],
                                   o["instance_type"], o["disk_class"]))

    chosen = (recommendation or {}).get("chosen")
    reachable = [d for d in by_disk if d["min_ram_gib"] is not None]
    least_ram = min((d["min_ram_gib"] for d in reachable), default=None)
    # The slowest disk class that needs no more RAM than the best one: what the workload needs.
    slowest_ok = [d for d in reachable if d["min_ram_gib"] == least_ram]
    slowest_ok.sort(key=lambda d: math.inf if d["disk_mbps"] is None else d["disk_mbps"])
    residuals = _residual_map(fit)
    fitted = list(fit.residuals or [])
    g_param = fit.params.get("gpu_ceiling")
    ctx.update(
        ceiling=ceiling,
        ceiling_name=fit.ceiling_name,
        ceiling_how=("measured with input already on the device" if g_param is not None and g_param.source == "measured"
                     else "fitted: the level the measured points reach"),
        recommendation=recommendation,
        no_recommendation=why_none if chosen is None else None,
        knee={
            "tolerance": tolerance,
            "ceiling": ceiling,
            "by_decode": vcpu_knee(points, ceiling, tolerance, fit.ceiling_name),
            "predicted_vcpus": knee_pred,
            "predicted_at": {"ram_gib": ram_high, "disk_mbps": fastest},
        },
        needs={
            "vcpus": knee_pred,
            "disk_class": slowest_ok[0]["disk_class"] if slowest_ok else None,
            "ram_gib": least_ram,
            "by_disk": by_disk,
            "chosen_disk_class": chosen["disk_class"] if chosen else None,
            "chosen_memory_gib": chosen["memory_gib"] if chosen else None,
            "out_of_memory": out_of_memory(points),
        },
        model={
            "params": [
                {
                    "name": p.name,
                    "value": _num(p.value),
                    "low": _num(p.low),
                    "high": _num(p.high),
                    "unit": p.unit,
                    "source": p.source,
                    "identifiable": bool(getattr(p, "identifiable", True)),
                    "note": getattr(p, "note", ""),
                }
                for p in fit.params.values()
            ],
            "kind": getattr(fit, "model", "min"),
            "notes": list(getattr(fit, "notes", []) or []),
            "n_points": fit.n_points,
            "loo_median_ape": _num(fit.loo_median_ape),
            "loo_max_ape": _num(fit.loo_max_ape),
            "calibration_ips": _num(fit.calibration_ips),
        },
        points=[_point_row(p, _match_predicted(p, fit, residuals, fitted) if p.usable else None) for p in points],
        curves=_curves(fit, points, disks, ram_high / 2),
        catalog_rows=considered,
    )
    ctx["summary"] = _summary_sentence(name, unit, recommendation, why_none)
    return ctx


NOISY_RATE_DROP = 0.10  # a rate that falls by more than this with more vCPUs says the host was busy
ROUGH_MODEL_APE = 0.10  # a leave-one-out median error above this makes predictions rough
# CPU-bound windows at one vCPU count whose CPU time per sample differs by more than this ran at
# different speeds of the host (on lent H100 VMs: 3.3 against 4.9 ms an image at 2 vCPUs).
CPU_COST_SPREAD = 0.20


def quality_warnings(points: Sequence[Point], fit: Any, cpu_cost: bool = False) -> list[str]:
    """Plain-words warnings about the measurements themselves, each derived from the figures.
    `cpu_cost`: the fit already took each window's CPU cost out (`--cpu-cost`)."""
    out = []
    usable = [p for p in points if p.usable]
    noisy = [p for p in usable if p.status == "noisy"]
    if noisy:
        # The median as well as the worst: a loader-fed point at few vCPUs holds a handful of rounds, and
        # one sub-window holding a burst read 11 times its neighbours' rate on an H200 (2 vCPUs).
        worst = max(noisy, key=lambda p: p.spread)
        typical = statistics.median(p.spread for p in noisy)
        out.append(
            f"{len(noisy)} of {len(usable)} points were flagged noisy: the rates of their sub-windows differed by "
            f"{typical:.0%} (median), up to {worst.spread:.0%} (at {worst.shape_label()}): the host was probably "
            "busy with other work, or a loader handed over batches in bursts that a sub-window of a few batches "
            "splits unevenly. A point's figure is its whole window's rate."
        )
    pipeline = [p for p in usable if p.input != SYNTHETIC_INPUT]
    series: dict[tuple, list[Point]] = {}
    for p in pipeline:
        series.setdefault((p.ram_gib, p.disk_class, p.decode, p.input), []).append(p)
    drops = []
    for pts in series.values():
        pts.sort(key=lambda p: p.vcpus)
        for a, b in zip(pts, pts[1:]):
            if b.vcpus > a.vcpus and b.throughput < (1 - NOISY_RATE_DROP) * a.throughput:
                drops.append((a, b))
    if drops:
        a, b = max(drops, key=lambda ab: ab[0].throughput / ab[1].throughput)
        out.append(
            f"The measured rate fell with more vCPUs at {len(drops)} step(s), for example from "
            f"{a.throughput:,.4g} at {a.vcpus} to {b.throughput:,.4g} {a.unit} at {b.vcpus} vCPUs "
            f"({a.ram_gib:g} GiB, {a.disk_class}): more vCPUs should not be slower, so these points disagree."
        )
    alone = [p for p in usable if p.input == SYNTHETIC_INPUT]
    if alone and pipeline:
        ceiling = statistics.median(p.throughput for p in alone)
        best = max(pipeline, key=lambda p: p.throughput)
        if best.throughput > (1 + NOISY_RATE_DROP) * ceiling:
            out.append(
                f"The GPU-alone point ({ceiling:,.4g} {best.unit}, input already on the device) is slower than the "
                f"real pipeline at {best.shape_label()} ({best.throughput:,.4g}): the ceiling is understated."
            )
    moved = _cpu_cost_spread(usable)
    if moved and not cpu_cost:
        vcpus, low, high = moved
        out.append(
            f"CPU-bound windows at {vcpus} vCPUs spent {low:.2f} to {high:.2f} ms of CPU per sample "
            f"({high / low - 1:.0%} apart): the host's speed moved during the sweep, or these shapes cost "
            f"different CPU per sample; sizer report --cpu-cost fits with each window's CPU cost taken out."
        )
    loo = _num(getattr(fit, "loo_median_ape", None)) if fit is not None else None
    if loo is not None and loo > ROUGH_MODEL_APE:
        out.append(
            f"The model misses held-out points by a median {loo:.0%}: its predictions for unmeasured shapes are rough."
        )
    return out


def _cpu_cost_spread(points: Sequence[Point]) -> tuple[int, float, float] | None:
    """The vCPU count whose CPU-bound windows differ most in CPU time per sample, with the least and
    the most, where they differ by more than CPU_COST_SPREAD; None otherwise."""
    from sizer.model import BUSY_CPU_UTIL, window_cpu_speed

    by_vcpus: dict[int, list[float]] = {}
    for p in points:
        speed = window_cpu_speed(p)
        if (p.cpu_util_per_vcpu or 0.0) >= BUSY_CPU_UTIL and speed:
            by_vcpus.setdefault(p.vcpus, []).append(1000.0 / speed)
    spreads = [(max(v) / min(v), n, min(v), max(v)) for n, v in by_vcpus.items() if len(v) > 1]
    if not spreads:
        return None
    ratio, vcpus, low, high = max(spreads)
    return (vcpus, low, high) if ratio - 1 > CPU_COST_SPREAD else None


def _disk_order(name: str) -> tuple[int, str]:
    order = {"local-nvme": 0, "ssd": 1, "standard": 2}
    return (order.get(name, 3), name)


# ---------------------------------------------------------------------------- inputs and outputs
def inputs_from_store(store: Any, sweep_id: int | None = None) -> dict[str, Any]:
    """Points, sweeps and enforcement records of a store (or of one sweep), as build_context takes them."""
    enforcement = []
    for row in store.point_rows(sweep_id):
        try:
            record = json.loads(row["enforced"] or "{}")
        except json.JSONDecodeError:
            record = {}
        enforcement.append(
            {
                "workload": row["workload"],
                "vcpus": row["vcpus"],
                "ram_gib": row["ram_gib"],
                "disk_class": row["disk_class"],
                **(record if isinstance(record, dict) else {}),
            }
        )
    sweeps = [s for s in store.sweeps() if sweep_id is None or s.id == sweep_id]
    points = store.points(sweep_id)
    # Points carry the host's calibration so the model and qualify can use it (the store keeps it per sweep).
    by_sweep = {s.id: sweep_calibration_ips(s.calibration) for s in sweeps}
    for point, row in zip(points, store.point_rows(sweep_id)):
        if point.calibration_ips is None:
            point.calibration_ips = by_sweep.get(row["sweep_id"])
    return {"points": points, "sweeps": sweeps, "enforcement": enforcement}


def _templates_dir() -> Any:
    return resources.files("reports").joinpath("templates")


def render_html(context: dict[str, Any]) -> str:
    """report.html from the context: one self-contained file (inline CSS and SVG, no scripts)."""
    import jinja2
    from markupsafe import Markup

    from sizer.charts import workload_charts

    templates = _templates_dir()
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: templates.joinpath(name).read_text()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=format_number, pct=format_percent, money=format_money, gib=format_gib)
    charts = {
        wl["workload"]: [dict(c, svg=Markup(c["svg"])) for c in workload_charts(wl, i)]
        for i, wl in enumerate(context["workloads"])
        if wl["fitted"]
    }
    groups = {wl["workload"]: catalog_groups(wl["catalog_rows"]) for wl in context["workloads"]}
    css = templates.joinpath("report.css").read_text()
    if "</" in css:
        raise SizerError("report.css must not contain '</'")  # it is inlined in a <style> element
    return env.get_template("report.html.j2").render(ctx=context, charts=charts, groups=groups, css=Markup(css))


def catalog_groups(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Options grouped by instance (first appearance order, so cheapest first): one row per instance
    in the report, its disk options listed inside it."""
    out: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row["cloud"], row["instance_type"], row["region"])
        if key not in out:
            out[key] = {**row, "options": []}
        out[key]["options"].append(row)
    return list(out.values())


def format_number(value: Any, digits: int = 3) -> str:
    """Readable figures: thousands separators, `digits` significant digits for small values."""
    number = _num(value)
    if number is None:
        return "–"
    if abs(number) >= 10 ** digits or number == int(number) and abs(number) >= 1:
        return f"{number:,.0f}"
    return f"{number:,.{digits}g}"


def format_percent(value: Any, digits: int = 1) -> str:
    number = _num(value)
    return "–" if number is None else f"{number * 100:.{digits}f}%"


def format_money(value: Any) -> str:
    number = _num(value)
    return "–" if number is None else f"${number:,.2f}"


def format_gib(value: Any) -> str:
    number = _num(value)
    return "–" if number is None else f"{number:g} GiB"


def write_outputs(points: Sequence[Point], out_dir: str | Path, **kwargs: Any) -> dict[str, Path]:
    """Write report.html, results.json and points.csv into out_dir; returns their paths."""
    context = build_context(points, **kwargs)
    return write_context(context, points, out_dir)


def write_context(context: dict[str, Any], points: Iterable[Point], out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SizerError(f"cannot create output folder {out}: {exc.strerror}") from None
    html = render_html(context)  # render before writing anything, so a failure leaves no half report
    paths = {"report.html": out / "report.html", "results.json": out / "results.json", "points.csv": out / "points.csv"}
    for name, text in (("report.html", html), ("results.json", json.dumps(context, indent=2, sort_keys=True) + "\n")):
        tmp = paths[name].with_suffix(paths[name].suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(paths[name])
    tmp = out / "points.csv.tmp"
    write_points_csv(points, tmp)
    tmp.replace(paths["points.csv"])
    return paths


def load_inputs(store: str | Path | None, input_file: str | Path | None) -> dict[str, Any]:
    """Points (and, from a store, sweeps and enforcement) from exactly one of a store or a points file."""
    from sizer.points import read_points_csv
    from sizer.store import Store

    if store and input_file:
        raise SizerError("give either --store or --input, not both")
    if not store and not input_file:
        raise SizerError("give --store PATH (a sweep's store, e.g. results/sizer.sqlite) or --input points.csv")
    if input_file:
        return {"points": read_points_csv(input_file), "sweeps": [], "enforcement": None, "source": str(input_file)}
    with Store(store, create=False) as opened:
        data = inputs_from_store(opened)
    if not data["points"]:
        raise SizerError(f"the store {store} holds no points yet (run `sizer sweep --store {store}`)")
    return {**data, "source": str(store)}
