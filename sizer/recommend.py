"""The recommendation: the cheapest catalog instance and disk class that does not slow the GPU.

For one fitted workload and one GPU model: predict the throughput of every catalog row of that GPU
with every disk class it can use, per GPU (a multi-GPU row is sized by its per-GPU share of vCPUs,
RAM, local NVMe, disk bandwidth and price), keep the options whose prediction is at least
(1 - tolerance) of the GPU ceiling, and choose the cheapest priced one. Every cheaper row that was
rejected says what rejected it (cpu, disk, memory, GPU memory), and the choice is compared with the
largest one-GPU shape of that GPU.

Pure given its inputs: the fit, the catalog rows, the disk-class table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sizer.catalog import LOCAL_NVME, InstanceType, disk_types_for, normalize_gpu
from sizer.diskclasses import DiskClass, load_disk_classes
from sizer.errors import SizerError
from sizer.model import WorkloadFit


@dataclass
class Option:
    instance: InstanceType
    disk_class: str
    predicted: float
    bottleneck: str  # gpu / cpu / disk / memory / gpu-memory
    meets: bool
    cost_per_million: float | None
    job_hours: float | None
    job_cost: float | None
    reason: str
    # The per-GPU share the prediction is for (the whole row when it has one GPU).
    share_vcpus: float = 0.0
    share_memory_gib: float = 0.0
    price_per_gpu_hour: float | None = None
    disk_mbps: float | None = None


@dataclass
class Recommendation:
    workload: str
    unit: str
    gpu: str
    ceiling: float
    tolerance: float
    chosen: Option | None
    rejected_cheaper: list[Option]
    considered: list[Option]
    saving_vs_largest: dict | None
    reason: str
    needs_local_nvme: bool
    closest: Option | None = None  # the fastest priced option, when none meets the bound
    notes: list[str] = field(default_factory=list)
    ceiling_name: str = "GPU ceiling"  # WorkloadFit.ceiling_name


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.3g}"


def _money(x: float | None) -> str:
    return "no price" if x is None else (f"${x:,.2f}" if x >= 0.1 else f"${x:,.4f}")


def _disk_rank(name: str, table: dict[str, DiskClass]) -> float:
    """Lower = less capable (cheaper) disk class; unthrottled local NVMe last."""
    cls = table.get(name)
    if cls is None or cls.read_mbps is None:
        return math.inf
    return float(cls.read_mbps)


def recommend(
    fit: WorkloadFit,
    catalog: list[InstanceType],
    gpu: str,
    tolerance: float = 0.05,
    disk_classes: dict[str, DiskClass] | None = None,
    job_samples: float | None = None,
    gpu_memory_needed_gib: float | None = None,
    cpu_scale: float = 1.0,
) -> Recommendation:
    """Cheapest option within `tolerance` of the ceiling (the GPU's own speed where the job runs
    one), with the why of every cheaper one.

    `job_samples` (e.g. 90 epochs x 1.28 M images) adds the time and cost of that job on one GPU.
    `gpu_memory_needed_gib` (default: the fit's measured GPU memory) excludes GPUs it does not fit.
    `cpu_scale` scales the CPU term for the target's CPU model (see sizer.model.cpu_scale).
    """
    if not 0 < tolerance < 1:
        raise SizerError(f"tolerance must be a fraction between 0 and 1 (for example 0.05), got {tolerance:g}")
    if job_samples is not None and job_samples <= 0:
        raise SizerError(f"job samples must be > 0, got {job_samples:g}")
    table = disk_classes if disk_classes is not None else load_disk_classes()
    want = normalize_gpu(gpu)
    rows = [r for r in catalog if normalize_gpu(r.gpu) == want]
    ceiling = fit.ceiling
    target = (1.0 - tolerance) * ceiling
    unit = fit.unit
    notes: list[str] = []
    measured_gpu = normalize_gpu(fit.gpu_model) if fit.gpu_model else ""
    if measured_gpu and measured_gpu != want:
        notes.append(f"measured on {measured_gpu}: its {fit.ceiling_name} is assumed for {want}")
    if not fit.params["gpu_ceiling"].identifiable:
        notes.append(f"the {fit.ceiling_name} was not reached in the measurements: {_fmt(ceiling)} {unit} is a lower bound")
    if cpu_scale != 1.0:
        notes.append(f"CPU term scaled by {cpu_scale:.3g} for the target CPU model")
    if not rows:
        return Recommendation(fit.workload, unit, want, ceiling, tolerance, None, [], [], None,
                              f"no catalog row has GPU {want}", False, notes=notes, ceiling_name=fit.ceiling_name)

    gpu_mem_needed = gpu_memory_needed_gib if gpu_memory_needed_gib is not None else fit.gpu_memory_gib
    dataset = fit.value("dataset_gib", 0.0) or 0.0
    max_share_ram = max(r.memory_gib / r.gpu_count for r in rows)

    considered: list[Option] = []
    for row in rows:
        considered.extend(_row_options(fit, row, table, target, ceiling, job_samples, gpu_mem_needed, dataset,
                                       max_share_ram, cpu_scale))

    meeting = [o for o in considered if o.meets and o.price_per_gpu_hour is not None]
    # Cheapest per GPU-hour; among equals: fewer GPUs, the least capable disk, the faster, the roomier.
    chosen = min(meeting, key=lambda o: (o.price_per_gpu_hour, o.instance.gpu_count, _disk_rank(o.disk_class, table),
                                         -o.predicted, -o.share_vcpus, -o.share_memory_gib, o.instance.cloud,
                                         o.instance.instance_type)) if meeting else None
    needs_nvme = _needs_local_nvme(fit, considered, rows, table, target, cpu_scale)
    closest = None
    rejected: list[Option] = []
    if chosen is not None:
        # Every priced row cheaper than the choice: its best disk option, which still falls short.
        by_row: dict[tuple, Option] = {}
        for o in considered:
            if o.price_per_gpu_hour is None or o.price_per_gpu_hour >= chosen.price_per_gpu_hour:
                continue
            best = by_row.get(o.instance.key)
            if best is None or (o.predicted, -_disk_rank(o.disk_class, table)) > (
                    best.predicted, -_disk_rank(best.disk_class, table)):
                by_row[o.instance.key] = o
        rejected = sorted(by_row.values(), key=lambda o: (o.price_per_gpu_hour, o.instance.instance_type))
        reason = _chosen_reason(chosen, ceiling, unit, want, tolerance, rejected, fit.ceiling_name)
        beyond = _beyond_measured(fit, chosen, target, cpu_scale)
        if beyond:
            notes.append(beyond)
    else:
        priced = [o for o in considered if o.price_per_gpu_hour is not None and o.bottleneck != "gpu-memory"]
        if priced:
            closest = max(priced, key=lambda o: (round(o.predicted, 6), -o.price_per_gpu_hour))
            reason = (f"no {want} instance in the catalog reaches {1 - tolerance:.0%} of the {fit.ceiling_name} "
                      f"({_fmt(ceiling)} {unit}); the fastest, {closest.instance.instance_type} with a "
                      f"{closest.disk_class} disk, is predicted at {_fmt(closest.predicted)} {unit} "
                      f"({closest.predicted / ceiling:.0%}), bound by {closest.bottleneck}")
        elif any(o.meets for o in considered):
            reason = (f"only unpriced {want} rows reach the bound (for example "
                      f"{next(o for o in considered if o.meets).instance.instance_type}): add their prices with --catalog")
        elif considered and all(o.bottleneck == "gpu-memory" for o in considered):
            reason = f"the workload needs {gpu_mem_needed:.3g} GiB of GPU memory: it does not fit a {want}"
        else:
            reason = f"no priced {want} row in the catalog"
    saving = _saving_vs_largest(chosen, considered, job_samples) if chosen is not None else None
    return Recommendation(
        workload=fit.workload,
        unit=unit,
        gpu=want,
        ceiling=ceiling,
        tolerance=tolerance,
        chosen=chosen,
        rejected_cheaper=rejected,
        considered=considered,
        saving_vs_largest=saving,
        reason=reason,
        needs_local_nvme=needs_nvme,
        closest=closest,
        notes=notes,
        ceiling_name=fit.ceiling_name,
    )


def _row_options(fit, row: InstanceType, table, target, ceiling, job_samples, gpu_mem_needed, dataset,
                 max_share_ram, cpu_scale) -> list[Option]:
    n = max(row.gpu_count, 1)
    share_v = row.vcpus / n
    share_m = row.memory_gib / n
    price = None if row.price_per_hour is None else row.price_per_hour / n
    share_note = (f"per-GPU share of a {n}-GPU instance: {share_v:g} vCPUs, {share_m:g} GiB RAM, "
                  f"1/{n} of the disk bandwidth and price" if n > 1 else "")
    options = []
    for disk in row.disk_classes:
        why: list[str] = []
        if share_note:
            why.append(share_note)
        if gpu_mem_needed is not None and row.gpu_memory_gib < gpu_mem_needed:
            options.append(Option(row, disk, 0.0, "gpu-memory", False, None, None, None,
                                  f"needs {gpu_mem_needed:.3g} GiB of GPU memory; the {row.gpu} has {row.gpu_memory_gib:g}",
                                  share_v, share_m, price, None))
            continue
        if disk == LOCAL_NVME:
            bw = fit.disk_mbps(LOCAL_NVME)
            if dataset > 0 and row.local_nvme_gib < dataset:
                options.append(Option(row, disk, 0.0, "disk", False, None, None, None,
                                      f"the dataset ({dataset:g} GiB) does not fit the local NVMe ({row.local_nvme_gib:g} GiB)",
                                      share_v, share_m, price, bw))
                continue
        elif disk in table:
            bw = fit.disk_mbps(disk)
            if bw is None:
                bw = table[disk].read_mbps
        else:
            continue  # a disk class this table does not know cannot be predicted
        if bw is not None:
            bw = bw / n
        pred = fit.predict(max(share_v, 1e-9), share_m, bw, cpu_scale=cpu_scale, monotone=True)
        x = pred.throughput
        bottleneck = pred.bottleneck
        if bottleneck in ("disk", "memory") and pred.ram_needed_gib is not None and x > 0:
            # More RAM is the lever only where some row of this GPU has that much.
            bottleneck = "memory" if pred.ram_needed_gib <= max_share_ram else "disk"
        meets = x >= target * (1 - 1e-9)
        cpm = None if price is None or x <= 0 else price / (x * 3600.0) * 1e6
        hours = cost = None
        if job_samples and x > 0:
            hours = job_samples / x / 3600.0
            cost = None if price is None else hours * price
        if x <= 0:
            why.append("the workload's memory footprint does not fit")
        elif meets:
            why.append(f"{x / ceiling:.0%} of the {fit.ceiling_name}")
        else:
            why.append(f"{x / ceiling:.0%} of the {fit.ceiling_name}: {bottleneck}-bound")
            if bottleneck == "memory" and pred.ram_needed_gib:
                why.append(f"about {pred.ram_needed_gib:.3g} GiB would cache enough of the dataset")
        peak = fit.usl_peak_vcpus()
        if peak is not None and share_v > peak and bottleneck == "cpu":
            why.append(f"more than about {peak:.0f} input workers slow the pipeline down: run that many")
        if disk != LOCAL_NVME:
            types = disk_types_for(row.cloud, disk)
            if types:
                why.append(f"{disk} on {row.cloud}: {', '.join(types)}")
        if price is None:
            why.append("no price: listed, but cannot be recommended on price")
        options.append(Option(row, disk, x, bottleneck, meets, cpm, hours, cost, "; ".join(why),
                              share_v, share_m, price, bw))
    return options


def _beyond_measured(fit, option: Option, target: float, cpu_scale: float) -> str | None:
    """A note when an option meets the target only at more vCPUs than any measured point had: its
    CPU term there is the fitted curve's extrapolation, which a small change in the fit can turn
    (seen on the H200 example: the contention term of resnet50-train's fit fell from 0.0007 to 0
    when its figures were re-derived, and the 24-vCPU share of a p5en.48xlarge went from 89% to 100%
    of the ceiling)."""
    top = fit.measured_vcpus_max
    if not top or option.share_vcpus <= top:
        return None
    at_top = fit.predict(top, option.share_memory_gib, option.disk_mbps, cpu_scale=cpu_scale, monotone=True)
    if at_top.throughput >= target * (1 - 1e-9):
        return None
    return (f"{option.instance.instance_type} gives each GPU {option.share_vcpus:g} vCPUs, more than the {top} "
            f"measured; at {top} the model predicts {_fmt(at_top.throughput)} {fit.unit} "
            f"({at_top.throughput / fit.ceiling:.0%} of the {fit.ceiling_name}): the choice rests on extrapolating "
            f"the CPU term, so measure a shape with {option.share_vcpus:g} vCPUs before buying")


def _needs_local_nvme(fit, considered, rows, table, target, cpu_scale) -> bool:
    """True when only unthrottled local NVMe reaches the bound (so only instances with it qualify)."""
    meeting = [o for o in considered if o.meets]
    if meeting:
        return all(o.disk_class == LOCAL_NVME for o in meeting)
    # Nothing meets: would the biggest share reach it unthrottled but not on the fastest cloud disk?
    big = max(rows, key=lambda r: (r.vcpus / r.gpu_count, r.memory_gib / r.gpu_count))
    v, m = big.vcpus / big.gpu_count, big.memory_gib / big.gpu_count
    unthrottled = fit.predict(v, m, fit.disk_mbps(LOCAL_NVME), cpu_scale=cpu_scale, monotone=True).throughput
    capped = [c.read_mbps for c in table.values() if c.read_mbps is not None]
    if not capped:
        return False
    fastest = fit.predict(v, m, max(capped), cpu_scale=cpu_scale, monotone=True).throughput
    return unthrottled >= target > fastest


def _chosen_reason(chosen: Option, ceiling, unit, gpu, tolerance, rejected: list[Option],
                   ceiling_name: str = "GPU ceiling") -> str:
    inst = chosen.instance
    parts = [
        f"{inst.instance_type} ({inst.cloud}{', ' + inst.region if inst.region else ''}) with a {chosen.disk_class} disk "
        f"is the cheapest {gpu} option predicted within {tolerance:.0%} of the {ceiling_name}: "
        f"{_fmt(chosen.predicted)} of {_fmt(ceiling)} {unit}",
        f"{_money(chosen.price_per_gpu_hour)} per GPU-hour, {_money(chosen.cost_per_million)} per million samples",
    ]
    if inst.gpu_count > 1:
        parts.append(f"sized by its per-GPU share ({chosen.share_vcpus:g} vCPUs, {chosen.share_memory_gib:g} GiB)")
    if rejected:
        counts: dict[str, int] = {}
        for o in rejected:
            counts[o.bottleneck] = counts.get(o.bottleneck, 0) + 1
        parts.append(f"{len(rejected)} cheaper row(s) fall short: "
                     + ", ".join(f"{n} {b}-bound" for b, n in sorted(counts.items(), key=lambda kv: -kv[1])))
    if inst.price_source:
        source = inst.price_source.split(";")[0].strip()
        warning = " (WARNING: see the row's price source)" if "WARNING" in inst.price_source else ""
        parts.append(f"price: {source}{', ' + inst.price_date if inst.price_date else ''}{warning}")
    return "; ".join(parts)


def _saving_vs_largest(chosen: Option, considered: list[Option], job_samples) -> dict[str, Any] | None:
    """The choice against the largest one-GPU shape of the GPU (same cloud when it has one)."""
    priced = [o for o in considered if o.price_per_gpu_hour is not None and o.bottleneck != "gpu-memory"]
    single = [o for o in priced if o.instance.gpu_count == 1]
    pool = [o for o in single if o.instance.cloud == chosen.instance.cloud] or single
    basis = "largest one-GPU shape"
    if not pool:
        pool = [o for o in priced if o.instance.cloud == chosen.instance.cloud] or priced
        basis = "largest per-GPU share (no one-GPU shape of this GPU in the catalog)"
    if not pool:
        return None
    largest_row = max((o.instance for o in pool),
                      key=lambda r: (r.vcpus / r.gpu_count, r.memory_gib / r.gpu_count, r.price_per_hour or 0))
    row_opts = [o for o in pool if o.instance.key == largest_row.key]
    largest = max(row_opts, key=lambda o: (o.predicted, -math.inf if o.disk_mbps is None else 0))
    price_l = largest.price_per_gpu_hour
    price_c = chosen.price_per_gpu_hour
    out: dict[str, Any] = {
        "basis": basis,
        "cloud": largest.instance.cloud,
        "instance_type": largest.instance.instance_type,
        "region": largest.instance.region,
        "disk_class": largest.disk_class,
        "vcpus": largest.share_vcpus,
        "memory_gib": largest.share_memory_gib,
        "price_per_hour": price_l,
        "predicted": largest.predicted,
        "cost_per_million": largest.cost_per_million,
        "saving_per_hour": price_l - price_c,
        "saving_fraction": (price_l - price_c) / price_l if price_l else None,
        "saving_per_million": (None if largest.cost_per_million is None or chosen.cost_per_million is None
                               else largest.cost_per_million - chosen.cost_per_million),
    }
    if job_samples and largest.job_cost is not None and chosen.job_cost is not None:
        out["job_saving"] = largest.job_cost - chosen.job_cost
    return out
