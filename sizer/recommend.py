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
from sizer.model import Prediction, WorkloadFit, meets_tolerance


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
    _check_arguments(tolerance, job_samples)
    want = normalize_gpu(gpu)
    rows = [r for r in catalog if normalize_gpu(r.gpu) == want]
    notes = _fit_notes(fit, want, cpu_scale)
    answer = Recommendation(fit.workload, fit.unit, want, fit.ceiling, tolerance, None, [], [], None,
                            f"no catalog row has GPU {want}", False, notes=notes, ceiling_name=fit.ceiling_name)
    if not rows:
        return answer
    sizing = _Sizing(
        fit=fit,
        table=disk_classes if disk_classes is not None else load_disk_classes(),
        tolerance=tolerance,
        job_samples=job_samples,
        gpu_memory_needed_gib=gpu_memory_needed_gib if gpu_memory_needed_gib is not None else fit.gpu_memory_gib,
        cpu_scale=cpu_scale,
        dataset_gib=fit.value("dataset_gib", 0.0) or 0.0,
        max_share_ram_gib=max(r.memory_gib / r.gpu_count for r in rows),
    )
    answer.considered = [option for row in rows for option in _row_options(sizing, row)]
    answer.needs_local_nvme = _needs_local_nvme(sizing, answer.considered, rows)
    chosen = _cheapest_meeting(answer.considered, sizing.table)
    if chosen is None:
        answer.closest, answer.reason = _no_choice(sizing, answer.considered, want)
        return answer
    answer.chosen = chosen
    answer.rejected_cheaper = _rejected_cheaper(answer.considered, chosen, sizing.table)
    answer.reason = _chosen_reason(chosen, fit.ceiling, fit.unit, want, tolerance, answer.rejected_cheaper,
                                   fit.ceiling_name)
    beyond = _beyond_measured(sizing, chosen)
    if beyond:
        notes.append(beyond)
    answer.saving_vs_largest = _saving_vs_largest(chosen, answer.considered, job_samples)
    return answer


def _check_arguments(tolerance: float, job_samples: float | None) -> None:
    if not 0 < tolerance < 1:
        raise SizerError(f"tolerance must be a fraction between 0 and 1 (for example 0.05), got {tolerance:g}")
    if job_samples is not None and job_samples <= 0:
        raise SizerError(f"job samples must be > 0, got {job_samples:g}")


def _fit_notes(fit: WorkloadFit, gpu: str, cpu_scale: float) -> list[str]:
    """What the recommendation assumes of the fit: another GPU's ceiling, a lower bound, a CPU scale."""
    notes: list[str] = []
    measured_gpu = normalize_gpu(fit.gpu_model) if fit.gpu_model else ""
    if measured_gpu and measured_gpu != gpu:
        notes.append(f"measured on {measured_gpu}: its {fit.ceiling_name} is assumed for {gpu}")
    if not fit.params["gpu_ceiling"].identifiable:
        notes.append(f"the {fit.ceiling_name} was not reached in the measurements: {_fmt(fit.ceiling)} {fit.unit} "
                     "is a lower bound")
    if cpu_scale != 1.0:
        notes.append(f"CPU term scaled by {cpu_scale:.3g} for the target CPU model")
    return notes


@dataclass
class _Sizing:
    """What every option of one recommendation is judged against."""

    fit: WorkloadFit
    table: dict[str, DiskClass]
    tolerance: float
    job_samples: float | None
    gpu_memory_needed_gib: float | None
    cpu_scale: float
    dataset_gib: float
    max_share_ram_gib: float  # the most RAM per GPU of any row of this GPU

    def meets(self, throughput: float) -> bool:
        return meets_tolerance(throughput, self.fit.ceiling, self.tolerance)

    def predict(self, vcpus: float, ram_gib: float, disk_mbps: float | None) -> Prediction:
        return self.fit.predict(vcpus, ram_gib, disk_mbps, cpu_scale=self.cpu_scale, monotone=True)


@dataclass
class _Share:
    """One GPU's share of a catalog row: a multi-GPU row is sized per GPU."""

    gpus: int
    vcpus: float
    memory_gib: float
    price: float | None  # per GPU-hour

    @classmethod
    def of(cls, row: InstanceType) -> _Share:
        n = max(row.gpu_count, 1)
        price = None if row.price_per_hour is None else row.price_per_hour / n
        return cls(n, row.vcpus / n, row.memory_gib / n, price)

    @property
    def note(self) -> str:
        if self.gpus <= 1:
            return ""
        return (f"per-GPU share of a {self.gpus}-GPU instance: {self.vcpus:g} vCPUs, {self.memory_gib:g} GiB RAM, "
                f"1/{self.gpus} of the disk bandwidth and price")


def _row_options(sizing: _Sizing, row: InstanceType) -> list[Option]:
    """One option per disk class the row can use (none for a class the disk table does not know)."""
    share = _Share.of(row)
    options = [_disk_option(sizing, row, share, disk) for disk in row.disk_classes]
    return [o for o in options if o is not None]


def _disk_option(sizing: _Sizing, row: InstanceType, share: _Share, disk: str) -> Option | None:
    needed = sizing.gpu_memory_needed_gib
    if needed is not None and row.gpu_memory_gib < needed:
        return Option(row, disk, 0.0, "gpu-memory", False, None, None, None,
                      f"needs {needed:.3g} GiB of GPU memory; the {row.gpu} has {row.gpu_memory_gib:g}",
                      share.vcpus, share.memory_gib, share.price, None)
    if disk == LOCAL_NVME and 0 < sizing.dataset_gib and row.local_nvme_gib < sizing.dataset_gib:
        return Option(row, disk, 0.0, "disk", False, None, None, None,
                      f"the dataset ({sizing.dataset_gib:g} GiB) does not fit the local NVMe ({row.local_nvme_gib:g} GiB)",
                      share.vcpus, share.memory_gib, share.price, sizing.fit.disk_mbps(LOCAL_NVME))
    if disk != LOCAL_NVME and disk not in sizing.table:
        return None  # a disk class this table does not know cannot be predicted
    bw = sizing.fit.disk_mbps(disk)
    if bw is None and disk != LOCAL_NVME:
        bw = sizing.table[disk].read_mbps
    return _predicted_option(sizing, row, share, disk, None if bw is None else bw / share.gpus)


def _predicted_option(sizing: _Sizing, row: InstanceType, share: _Share, disk: str, bw: float | None) -> Option:
    """The option of one row and disk class as the model predicts it (`bw`: the share's read MB/s)."""
    pred = sizing.predict(max(share.vcpus, 1e-9), share.memory_gib, bw)
    x = pred.throughput
    bottleneck = pred.bottleneck
    if bottleneck in ("disk", "memory") and pred.ram_needed_gib is not None and x > 0:
        # More RAM is the lever only where some row of this GPU has that much.
        bottleneck = "memory" if pred.ram_needed_gib <= sizing.max_share_ram_gib else "disk"
    meets = sizing.meets(x)
    cost_per_million = None if share.price is None or x <= 0 else share.price / (x * 3600.0) * 1e6
    hours = cost = None
    if sizing.job_samples and x > 0:
        hours = sizing.job_samples / x / 3600.0
        cost = None if share.price is None else hours * share.price
    option = Option(row, disk, x, bottleneck, meets, cost_per_million, hours, cost, "",
                    share.vcpus, share.memory_gib, share.price, bw)
    option.reason = "; ".join(_option_reasons(sizing, option, share, pred.ram_needed_gib))
    return option


def _option_reasons(sizing: _Sizing, option: Option, share: _Share, ram_needed_gib: float | None) -> list[str]:
    """Why an option stands where it does: its share of the ceiling, what binds it, its disk and price."""
    fit, x, bottleneck = sizing.fit, option.predicted, option.bottleneck
    why = [share.note] if share.note else []
    if x <= 0:
        why.append("the workload's memory footprint does not fit")
    elif option.meets:
        why.append(f"{x / fit.ceiling:.0%} of the {fit.ceiling_name}")
    else:
        why.append(f"{x / fit.ceiling:.0%} of the {fit.ceiling_name}: {bottleneck}-bound")
        if bottleneck == "memory" and ram_needed_gib:
            why.append(f"about {ram_needed_gib:.3g} GiB would cache enough of the dataset")
    peak = fit.usl_peak_vcpus()
    if peak is not None and share.vcpus > peak and bottleneck == "cpu":
        why.append(f"more than about {peak:.0f} input workers slow the pipeline down: run that many")
    if option.disk_class != LOCAL_NVME:
        types = disk_types_for(option.instance.cloud, option.disk_class)
        if types:
            why.append(f"{option.disk_class} on {option.instance.cloud}: {', '.join(types)}")
    if share.price is None:
        why.append("no price: listed, but cannot be recommended on price")
    return why


def _cheapest_meeting(considered: list[Option], table: dict[str, DiskClass]) -> Option | None:
    """The cheapest priced option that meets the bound; among equals: fewer GPUs, the least capable
    disk, the faster, the roomier."""
    meeting = [o for o in considered if o.meets and o.price_per_gpu_hour is not None]
    if not meeting:
        return None
    return min(meeting, key=lambda o: (o.price_per_gpu_hour, o.instance.gpu_count, _disk_rank(o.disk_class, table),
                                       -o.predicted, -o.share_vcpus, -o.share_memory_gib, o.instance.cloud,
                                       o.instance.instance_type))


def _rejected_cheaper(considered: list[Option], chosen: Option, table: dict[str, DiskClass]) -> list[Option]:
    """Every priced row cheaper than the choice: its best disk option, which still falls short."""
    chosen_price = chosen.price_per_gpu_hour or 0.0
    by_row: dict[tuple, Option] = {}
    for o in considered:
        if o.price_per_gpu_hour is None or o.price_per_gpu_hour >= chosen_price:
            continue
        best = by_row.get(o.instance.key)
        if best is None or (o.predicted, -_disk_rank(o.disk_class, table)) > (
                best.predicted, -_disk_rank(best.disk_class, table)):
            by_row[o.instance.key] = o
    return sorted(by_row.values(), key=lambda o: (o.price_per_gpu_hour, o.instance.instance_type))


def _no_choice(sizing: _Sizing, considered: list[Option], gpu: str) -> tuple[Option | None, str]:
    """Where no priced option meets the bound: the fastest priced option, if any, and why none was chosen."""
    fit = sizing.fit
    priced = [o for o in considered if o.price_per_gpu_hour is not None and o.bottleneck != "gpu-memory"]
    if priced:
        closest = max(priced, key=lambda o: (round(o.predicted, 6), -(o.price_per_gpu_hour or 0.0)))
        return closest, (f"no {gpu} instance in the catalog reaches {1 - sizing.tolerance:.0%} of the "
                         f"{fit.ceiling_name} ({_fmt(fit.ceiling)} {fit.unit}); the fastest, "
                         f"{closest.instance.instance_type} with a {closest.disk_class} disk, is predicted at "
                         f"{_fmt(closest.predicted)} {fit.unit} ({closest.predicted / fit.ceiling:.0%}), "
                         f"bound by {closest.bottleneck}")
    meeting = [o for o in considered if o.meets]
    if meeting:
        return None, (f"only unpriced {gpu} rows reach the bound (for example {meeting[0].instance.instance_type}): "
                      "add their prices with --catalog")
    if considered and all(o.bottleneck == "gpu-memory" for o in considered):
        return None, (f"the workload needs {sizing.gpu_memory_needed_gib:.3g} GiB of GPU memory: "
                      f"it does not fit a {gpu}")
    return None, f"no priced {gpu} row in the catalog"


def _beyond_measured(sizing: _Sizing, option: Option) -> str | None:
    """A note when an option meets the target only at more vCPUs than any measured point had: its
    CPU term there is the fitted curve's extrapolation, which a small change in the fit can turn (a
    contention term of 0.0007 rather than 0 can take a 24-vCPU share from 100% to 89% of the
    ceiling)."""
    fit = sizing.fit
    top = fit.measured_vcpus_max
    if not top or option.share_vcpus <= top:
        return None
    at_top = sizing.predict(top, option.share_memory_gib, option.disk_mbps)
    if sizing.meets(at_top.throughput):
        return None
    return (f"{option.instance.instance_type} gives each GPU {option.share_vcpus:g} vCPUs, more than the {top} "
            f"measured; at {top} the model predicts {_fmt(at_top.throughput)} {fit.unit} "
            f"({at_top.throughput / fit.ceiling:.0%} of the {fit.ceiling_name}): the choice rests on extrapolating "
            f"the CPU term, so measure a shape with {option.share_vcpus:g} vCPUs before buying")


def _needs_local_nvme(sizing: _Sizing, considered: list[Option], rows: list[InstanceType]) -> bool:
    """True when only unthrottled local NVMe reaches the bound (so only instances with it qualify)."""
    meeting = [o for o in considered if o.meets]
    if meeting:
        return all(o.disk_class == LOCAL_NVME for o in meeting)
    # Nothing meets: would the biggest share reach it unthrottled but not on the fastest cloud disk?
    big = max(rows, key=lambda r: (r.vcpus / r.gpu_count, r.memory_gib / r.gpu_count))
    v, m = big.vcpus / big.gpu_count, big.memory_gib / big.gpu_count
    capped = [c.read_mbps for c in sizing.table.values() if c.read_mbps is not None]
    if not capped:
        return False
    unthrottled = sizing.predict(v, m, sizing.fit.disk_mbps(LOCAL_NVME)).throughput
    fastest = sizing.predict(v, m, max(capped)).throughput
    return sizing.meets(unthrottled) and not sizing.meets(fastest)


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


def _saving_vs_largest(chosen: Option, considered: list[Option], job_samples: float | None) -> dict[str, Any] | None:
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
    price_l = largest.price_per_gpu_hour or 0.0  # both priced: the pool and the choice have prices
    price_c = chosen.price_per_gpu_hour or 0.0
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
