"""The report's context: everything the report shows, as plain JSON-able data (results.json is this,
versioned). Per workload the recommendation and its reason, the vCPU knee, the disk class and RAM
the workload needs, the model's parameters and error, measured vs fitted points, the catalog rows
considered (`sizer.report.workload`); then host metadata, limits, calibration, the profile that ran
and the command to reproduce. Every figure comes from a point or a fit."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from sizer import __version__
from sizer.catalog import InstanceType, load_catalog
from sizer.diskclasses import DiskClass, load_disk_classes
from sizer.errors import SizerError
from sizer.fingerprint import HostFingerprint
from sizer.gpu_ranking import rank_workload
from sizer.interference import parallel_context
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE
from sizer.method import method_summary
from sizer.model import fit_points, group_points
from sizer.points import Point, combine_passes
from sizer.report.adaptive import attach_adaptive
from sizer.report.hosts import host_labels, points_by_host, shared_workloads, side_by_side
from sizer.report.sharing import shared_context
from sizer.report.trust import host_speed_timelines
from sizer.report.workload import workload_context
from sizer.sizing import (
    SizingTerms,
    disk_order,
    host_gpu_names,
    measured_fingerprint,
    sweep_host_speeds,
    target_catalog,
    target_gpu,
)
from sizer.store import SweepRow, sweep_calibration_ips
from sizer.values import jsonable, significant

RESULTS_SCHEMA_VERSION = 1
CPU_SMALL = "cpu-small"
LEFT_OUT_KEY = "left_out"  # sizer.sweep.dependencies.LEFT_OUT_KEY (the report does not import the sweep)


# ---------------------------------------------------------------------------- hosts, limits, profile
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
        "fleet_node": host.get("fleet_node"),  # the node types it offered in a fleet sweep (sizer.fleet)
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


def left_out(sweeps: Sequence[SweepRow]) -> list[dict[str, str]]:
    """The workloads a sweep planned but left out (`sizer sweep --skip-unavailable`), each with why
    and what to install: the newest sweep's word on each."""
    out: dict[str, dict[str, str]] = {}
    for sweep in sorted(sweeps, key=lambda s: s.id, reverse=True):
        for item in (sweep.calibration or {}).get(LEFT_OUT_KEY) or []:
            if isinstance(item, dict) and item.get("workload"):
                out.setdefault(str(item["workload"]), {k: str(item.get(k, "")) for k in ("workload", "reason", "install")})
    return list(out.values())


def _hosts(sweeps: Sequence[SweepRow]) -> list[dict[str, Any]]:
    """One summary per measured host, in the order its first sweep came."""
    hosts: dict[int, dict[str, Any]] = {}
    for s in sweeps:
        if s.host_id not in hosts:
            hosts[s.host_id] = _host_summary(s.host_id, s.host)
    return list(hosts.values())


def _limit_rows(enforcement: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per shape and enforcement record, repeats counted in `points`."""
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
    return sorted(
        groups.values(),
        key=lambda r: (str(r["workload"]), disk_order(str(r["disk_class"])), r["ram_gib"] or 0, r["vcpus"] or 0,
                       str(r["cpus"]), str(r["memory"]), str(r["disk"])),
    )


def _limits(enforcement: Sequence[dict[str, Any]] | None, hosts: list[dict[str, Any]]) -> dict[str, Any]:
    """How each limit was enforced, and which limits some points ran without."""
    if not enforcement:
        return {
            "recorded": False,
            "backends": sorted({h["limit_backend"] for h in hosts if h.get("limit_backend")}),
            "rows": [],
            "note": "These points carry no record of how their limits were enforced (imported from a points file).",
        }
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
        "rows": _limit_rows(enforcement),
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


# ---------------------------------------------------------------------------- sweeps, calibration, catalog
def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).replace(microsecond=0).isoformat()


def _sweep_rows(sweeps: Sequence[SweepRow]) -> list[dict[str, Any]]:
    return [
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


def _calibration(points: Sequence[Point], sweeps: Sequence[SweepRow]) -> dict[str, Any]:
    """The host's per-vCPU rate: the median over the points that carry it, else over the sweeps' records."""
    calib_points = [p.calibration_ips for p in points if p.calibration_ips]
    calib_sweeps = [v for v in (sweep_calibration_ips(s.calibration) for s in sweeps) if v]
    rates = calib_points or calib_sweeps
    return {
        "ips_per_vcpu": significant(statistics.median(rates), 6) if rates else None,
        "source": "points" if calib_points else ("sweep calibration" if calib_sweeps else None),
        "per_sweep": [{"sweep": s.id, **(s.calibration or {})} for s in sweeps if s.calibration],
        # the host's speed over each sweep, where recorded
        "timelines": host_speed_timelines([(s.id, s.calibration) for s in sweeps]),
        "note": (
            "One vCPU's JPEG decode-and-augment rate on this host. Another CPU model scales the CPU-bound "
            "figures by the ratio of its calibration to this one."
        ),
    }


def _cpu_target(target: float | HostFingerprint | None) -> dict[str, Any]:
    """The CPU the report answers for: the measuring host's, a fingerprint's (`--target-calibration
    FILE`) or a one-vCPU rate's; each workload's `cpu` says how its figures were translated."""
    if target is None:
        return {"kind": "measuring host", "fingerprint": None, "ips_per_vcpu": None,
                "note": "The answers are for the measuring host's CPU: another CPU model moves every CPU-bound "
                        "figure (give --target-calibration with the target's fingerprint)."}
    if isinstance(target, HostFingerprint):
        return {"kind": "fingerprint", "fingerprint": target.to_json(), "ips_per_vcpu": target.all_busy_ips,
                "note": f"The answers are for {target.label} ({target.rate_words()}): the CPU-side figures are "
                        "translated by the ratio of the every-vCPU-busy rates."}
    return {"kind": "rate", "fingerprint": None, "ips_per_vcpu": target,
            "note": f"The answers are for a CPU of {target:.0f} images/s per vCPU with one busy: the CPU-side "
                    "figures are translated by the ratio of the one-vCPU rates."}


def _catalog_summary(catalog: Sequence[Any], catalog_files: Sequence[str | Path]) -> dict[str, Any]:
    clouds = Counter((r.cloud, r.price_source, r.price_date) for r in catalog)
    return {
        "files": [str(f) for f in catalog_files],
        "rows_for_target": len(catalog),
        "sources": [
            {"cloud": cloud, "price_source": src, "price_date": date, "rows": n}
            for (cloud, src, date), n in sorted(clouds.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
        ],
    }


# ---------------------------------------------------------------------------- the target
def _workloads(measured: list[Point], points: list[Point], terms: SizingTerms, cpu_cost: bool,
               on: str = "", ranked: Sequence[InstanceType] = ()) -> list[dict[str, Any]]:
    """One entry per fitted group of points (a workload variant), in name order; `on` names their
    host. With `ranked` (every GPU type's catalog rows), each sized entry carries its `gpu_ranking`."""
    # Every measurement: the fit takes each shape at the median of its passes, after --cpu-cost's scaling.
    fits = fit_points(measured, dict(terms.disk_classes), dataset_gib=terms.dataset_gib, cpu_cost=cpu_cost)
    by_workload = group_points(points)
    out = []
    for name in sorted(by_workload):
        label = f"{name} on {on}" if on else name
        entry = workload_context(label, by_workload[name], fits.get(name), terms, cpu_cost)
        if ranked and entry["sized"]:
            entry["gpu_ranking"] = rank_workload(label, by_workload[name], fits[name], ranked, terms, None)
        if on:
            entry["host"] = {"label": on, "variant": name}
        out.append(entry)
    return out


def _workloads_per_host(measured: list[Point], points: list[Point], hosts: list[dict[str, Any]],
                        sweeps: Sequence[SweepRow], terms: SizingTerms, cpu_cost: bool,
                        ranked: Sequence[InstanceType] = ()) -> list[dict[str, Any]]:
    """Each workload measured on several hosts once per host, fitted on that host's points alone
    (sizer.report.hosts); every other workload once, as on one host."""
    shared = shared_workloads(measured)
    if not shared:
        return _workloads(measured, points, terms, cpu_cost, ranked=ranked)
    alone = [p for p in measured if p.workload not in shared]
    out = _workloads(alone, combine_passes(alone), terms, cpu_cost, ranked=ranked) if alone else []
    labels = host_labels(hosts)
    for host_id, mine in points_by_host([p for p in measured if p.workload in shared]).items():
        mine_sweeps = [s for s in sweeps if s.host_id == host_id]
        own = dataclasses.replace(terms, host_speeds=sweep_host_speeds(s.calibration for s in mine_sweeps),
                                  measured_host=measured_fingerprint(mine_sweeps))
        out.extend(_workloads(mine, combine_passes(mine), own, cpu_cost, labels.get(host_id, f"host {host_id}"),
                              ranked))
    rank = {label: i for i, label in enumerate(labels.values())}  # hosts in the order their first sweep came
    return sorted(out, key=lambda w: (w["host"]["variant"], rank.get(w["host"]["label"], -1)) if "host" in w
                  else (w["workload"], -1))


# ---------------------------------------------------------------------------- the context
def build_context(
    points: Sequence[Point],
    *,
    sweeps: Sequence[SweepRow] = (),
    gpu: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    catalog_files: Sequence[str | Path] = (),
    dataset_gib: float | None = None,
    job_samples: float | None = None,
    command: str = "",
    enforcement: Sequence[dict[str, Any]] | None = None,
    disk_classes: dict[str, DiskClass] | None = None,
    source: str = "",
    cpu_cost: bool = False,
    confidence: float = DEFAULT_CONFIDENCE,
    rank_gpus: bool = False,
    target_calibration: float | HostFingerprint | None = None,
) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data (results.json is this, versioned).

    `confidence`: the level of every range, and the recommendation is the cheapest option that
    meets the tolerance at the pessimistic end of its range at that level (0.5: the figure itself).

    Each shape is shown at the median of its passes. `cpu_cost`: the model is fitted on CPU-bound
    figures with each window's CPU time per sample taken out (`sizer.model.take_out_cpu_cost`); the
    points shown stay as measured. `rank_gpus`: every sized workload is also ranked across every GPU
    type of the catalogs (`gpu_ranking`, the report's first table; `sizer.gpu_ranking`).
    `target_calibration`: the CPU to answer for (a host fingerprint, or a one-vCPU rate; None: the
    measuring host's), the CPU-side figures translated to it."""
    measured = list(points)
    points = combine_passes(measured)
    if not points:
        raise SizerError("no points to report (measure some with `sizer sweep`, or give --input points.csv)")
    disk_classes = disk_classes if disk_classes is not None else load_disk_classes()

    hosts = _hosts(sweeps)
    host_gpus = [g for h in hosts for g in h["gpus"]] + [p.gpu_model for p in points if p.gpu_model]
    target, target_source = target_gpu(gpu, host_gpus)
    catalog = target_catalog(target, gpu, catalog_files)
    terms = SizingTerms(tuple(catalog), target, disk_classes, tolerance, confidence, dataset_gib, job_samples,
                        target_calibration, host_speeds=sweep_host_speeds(s.calibration for s in sweeps),
                        measured_host=measured_fingerprint(sweeps))
    ranked = load_catalog(user_files=tuple(catalog_files), builtin=True) if rank_gpus else []
    workloads = _workloads_per_host(measured, points, hosts, sweeps, terms, cpu_cost, ranked)
    attach_adaptive(workloads, sweeps)  # `sizer sweep --strategy adaptive`: measured, predicted, why it stopped
    return jsonable({
        "schema_version": RESULTS_SCHEMA_VERSION,
        "sizer_version": __version__,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "source": source,
        "target": {"gpu": target, "source": target_source, "host_gpus": sorted(set(host_gpus)),
                   "illustrative": not host_gpus},
        "profile": _profile(points, host_gpus, target),
        "tolerance": tolerance,
        "dataset_gib": dataset_gib,
        "job_samples": job_samples,
        "cpu_cost": cpu_cost,
        "confidence": confidence,
        "workloads": workloads,
        # `--gpu any`: each sized workload's GPU types by cost per million samples (null when not asked)
        "gpu_ranking": [wl["gpu_ranking"] for wl in workloads if "gpu_ranking" in wl] if rank_gpus else None,
        "left_out": left_out(sweeps),  # planned, not measured: a module or interpreter missing (--skip-unavailable)
        "side_by_side": side_by_side(workloads),  # several hosts' answers per workload, None for one host
        "catalog": _catalog_summary(catalog, catalog_files),
        "hosts": hosts,
        "sweeps": _sweep_rows(sweeps),
        "limits": _limits(enforcement, hosts),
        "parallel": parallel_context(measured),  # `sizer sweep --parallel`: points beside others, the interference check
        "shared": shared_context(measured, workloads, terms),  # pairs of jobs on one GPU (`sizer colocate`), priced
        "calibration": _calibration(points, sweeps),
        "cpu_target": _cpu_target(target_calibration),
        "method": method_summary(measured),  # the rule each figure follows (workloads.protocol.METHOD_VERSION)
        "disk_classes": [
            {"name": d.name, "read_mbps": d.read_mbps, "read_iops": d.read_iops, "description": d.description}
            for d in disk_classes.values()
        ],
        "reproduce": {"command": command, "sweep_commands": sorted({s.command for s in sweeps if s.command})},
    })


def nothing_sized(context: dict[str, Any]) -> str | None:
    """Why no workload of a report could be sized (each one's reason), or None when one could."""
    workloads = context["workloads"]
    if any(wl["sized"] for wl in workloads):
        return None
    reasons = "; ".join(f"{wl['workload']}: {wl['no_recommendation']}" for wl in workloads)
    return f"no workload could be sized ({reasons})"
