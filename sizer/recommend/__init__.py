"""The recommendation: the cheapest catalog instance and disk class that does not slow the GPU.

For one fitted workload and one GPU model: predict the throughput of every catalog row of that GPU
with every disk class it can use, per GPU (a multi-GPU row is sized by its per-GPU share of vCPUs,
disk bandwidth and price; its page cache is the instance's, one copy of the data serving every GPU:
`sizer.model.scaling.shared_cache_ram_gib`), keep the options whose prediction is at least
(1 - tolerance) of the GPU ceiling, and choose the cheapest priced one. A multi-GPU row is judged
by its loaded per-GPU figure (`sizer.model.scaling.GpuScaling.loaded_at`): one GPU's figure times
the efficiency measured with several GPUs at once ("assumed linear beyond N measured GPUs" past the
largest count measured), or as measured with every slot of a parallel sweep busy, or times the load
factor of its interference check; its reason says which, and where none was measured it says the
figure is an idle host's. Its cost per sample follows the same figure. Prices per GPU-hour are
compared in whole cents, so a multi-GPU row whose price divides to a hair below a one-GPU row's ties
with it, and the tie goes to fewer GPUs. Every cheaper row that was rejected says what rejected it
(cpu, disk, memory, GPU memory), and the choice is compared with the largest shape of its family.

Pure given its inputs: the fit, the catalog rows, the disk-class table.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sizer.catalog import LOCAL_NVME, InstanceType, disk_types_for, normalize_gpu, whole_cents
from sizer.diskclasses import DiskClass, load_disk_classes
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE
from sizer.model import Prediction, WorkloadFit, meets_tolerance
from sizer.model.decision import Judge, ShapeFigure, untrusted_words
from sizer.model.scaling import GpuScaling, LoadedFigure, shared_cache_ram_gib
from sizer.recommend.types import Option, Recommendation
from sizer.units import unit_noun


def lower_bound_reached(rate: float, fit: WorkloadFit) -> bool:
    """Whether a rate stands at a ceiling that is only a lower bound (held at the best measurement):
    such a share is never said to be 100%, only at least the best measured."""
    return fit.params["gpu_ceiling"].bound == "lower" and rate >= fit.ceiling * (1 - 1e-9)


def share_words(rate: float, fit: WorkloadFit) -> str:
    """A rate's share of the ceiling in words (see `lower_bound_reached`)."""
    return "at least the best measured" if lower_bound_reached(rate, fit) else f"{rate / fit.ceiling:.0%}"


def share_phrase(rate: float, fit: WorkloadFit) -> str:
    """`share_words` with what it is a share of."""
    if lower_bound_reached(rate, fit):
        return "at least the best measured rate (the ceiling is a lower bound)"
    return f"{rate / fit.ceiling:.0%} of the {fit.ceiling_name}"


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
    tolerance: float = DEFAULT_TOLERANCE,
    disk_classes: dict[str, DiskClass] | None = None,
    job_samples: float | None = None,
    gpu_memory_needed_gib: float | None = None,
    cpu_scale: float = 1.0,
    confidence: float = DEFAULT_CONFIDENCE,
    trusted: bool | None = None,
) -> Recommendation:
    """Cheapest option within `tolerance` of the ceiling (the GPU's own speed where the job runs
    one) at the pessimistic end of its range at `confidence`, with the why of every cheaper one.

    Each option's figure is measured where its shape contains a measured one, else the model's
    (`sizer.model.decision`); a model whose held-out error exceeds twice the tolerance sizes only
    from measured shapes. `job_samples` (e.g. 90 epochs x 1.28 M images) adds the time and cost of
    that job on one GPU. `gpu_memory_needed_gib` (default: the fit's measured GPU memory) excludes
    GPUs it does not fit. `cpu_scale` scales the CPU term for the target's CPU model (see
    sizer.model.cpu_scale); measured figures, of another CPU model, then do not apply. `trusted`
    sets whether the model is trusted (default: its held-out error judges it). The levels and the
    job are checked where they enter (`sizer.sizing.SizingTerms`, the command line).
    """
    want = normalize_gpu(gpu)
    rows = [r for r in catalog if normalize_gpu(r.gpu) == want]
    notes = _fit_notes(fit, want, cpu_scale)
    answer = Recommendation(fit.workload, fit.unit, want, fit.ceiling, tolerance, None, [], [], None,
                            f"no catalog row has GPU {want}", False, notes=notes, ceiling_name=fit.ceiling_name,
                            confidence=confidence)
    if not rows:
        return answer
    table = disk_classes if disk_classes is not None else load_disk_classes()
    judge = Judge.of(fit, table, tolerance, confidence, measurements=cpu_scale == 1.0 and not _restated(fit),
                     trusted=trusted)
    answer.model_trusted = judge.trusted
    if not judge.trusted:
        notes.append(_untrusted_note(fit, tolerance))
    if _restated(fit):
        notes.append("sized for the stated dataset, not the measured one: the model, not the measured figures, "
                     "decides each option")
    sizing = _Sizing(
        fit=fit,
        table=disk_classes if disk_classes is not None else load_disk_classes(),
        tolerance=tolerance,
        job_samples=job_samples,
        gpu_memory_needed_gib=gpu_memory_needed_gib if gpu_memory_needed_gib is not None else fit.gpu_memory_gib,
        cpu_scale=cpu_scale,
        dataset_gib=fit.value("dataset_gib", 0.0) or 0.0,
        max_share_ram_gib=max(shared_cache_ram_gib(r.memory_gib, r.gpu_count, _footprint(fit)) for r in rows),
        judge=judge,
        scaling=fit.scaling if isinstance(fit.scaling, GpuScaling) else GpuScaling(),
    )
    notes.extend(_scaling_notes(sizing, rows))
    answer.considered = [option for row in rows for option in _row_options(sizing, row)]
    answer.needs_local_nvme = _needs_local_nvme(sizing, answer.considered, rows)
    chosen = _cheapest_meeting(answer.considered, sizing.table)
    optimistic = _cheapest_meeting(answer.considered, sizing.table, optimistic=True)
    if optimistic is not None and (chosen is None or (optimistic.instance.key, optimistic.disk_class)
                                   != (chosen.instance.key, chosen.disk_class)):
        answer.optimistic = optimistic
    if chosen is None:
        answer.closest, answer.reason = _no_choice(sizing, answer.considered, want)
        answer.disagreements = _disagreements([answer.closest, answer.optimistic], tolerance)
        return answer
    answer.chosen = chosen
    answer.rejected_cheaper = _rejected_cheaper(answer.considered, chosen, sizing.table)
    answer.reason = _chosen_reason(chosen, fit.ceiling, fit.unit, want, tolerance, answer.rejected_cheaper,
                                   fit.ceiling_name)
    answer.disagreements = _disagreements([chosen, answer.optimistic, *answer.rejected_cheaper], tolerance)
    answer.reason += _figure_reason(chosen, confidence)
    beyond = _beyond_measured(sizing, chosen)
    if beyond:
        notes.append(beyond)
    answer.saving_vs_largest = _saving_vs_largest(chosen, answer.considered, job_samples)
    return answer


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
    max_share_ram_gib: float  # the most RAM one GPU of any row of this GPU has for itself (its page cache shared)
    judge: Judge | None = None  # the decision's figures; None: the model's prediction alone
    scaling: GpuScaling = field(default_factory=GpuScaling)  # the fit's multi-GPU measurements

    def meets(self, throughput: float) -> bool:
        return meets_tolerance(throughput, self.fit.ceiling, self.tolerance)

    def predict(self, vcpus: float, ram_gib: float, disk_mbps: float | None) -> Prediction:
        return self.fit.predict(vcpus, ram_gib, disk_mbps, cpu_scale=self.cpu_scale, monotone=True)


@dataclass
class _Share:
    """One GPU's share of a catalog row: a multi-GPU row is sized per GPU, its page cache shared."""

    gpus: int
    vcpus: float
    memory_gib: float
    price: float | None  # per GPU-hour
    cache_ram_gib: float = 0.0  # the RAM one GPU behaves as if it had alone (shared_cache_ram_gib)
    efficiency: float = 1.0  # its loaded per-GPU rate against one GPU's alone (sizer.model.scaling)
    scaling_note: str = ""
    loaded: LoadedFigure = LoadedFigure(1.0, "one GPU")

    @classmethod
    def of(cls, row: InstanceType, footprint_gib: float = 0.0, scaling: GpuScaling | None = None) -> _Share:
        n = max(row.gpu_count, 1)
        price = None if row.price_per_hour is None else row.price_per_hour / n
        scaling = scaling or GpuScaling()
        loaded = scaling.loaded_at(n, row.vcpus / n)
        return cls(n, row.vcpus / n, row.memory_gib / n, price, shared_cache_ram_gib(row.memory_gib, n, footprint_gib),
                   loaded.factor, scaling.note_for(n) if n > 1 else "", loaded)

    @property
    def note(self) -> str:
        if self.gpus <= 1:
            return ""
        words = (f"per-GPU share of a {self.gpus}-GPU instance: {self.vcpus:g} vCPUs, {self.memory_gib:g} GiB RAM "
                 f"(one page cache for all its GPUs: as {self.cache_ram_gib:.3g} GiB to one GPU alone), "
                 f"1/{self.gpus} of the disk bandwidth and price")
        return words + (f"; {self.loaded.words}" if self.loaded.words else "")


def _footprint(fit: WorkloadFit) -> float:
    return float(fit.value("footprint_gib", 0.0) or 0.0)


def _scaling_notes(sizing: _Sizing, rows: list[InstanceType]) -> list[str]:
    """What sizing the rows of more GPUs than measured assumes: one note for all of them."""
    beyond = sorted({r.gpu_count for r in rows if r.gpu_count > 1 and sizing.scaling.note_for(r.gpu_count)})
    if not beyond:
        return []
    measured = sizing.scaling.measured_gpus
    counts = ", ".join(map(str, beyond))
    if measured == 1:
        return [f"rows of {counts} GPUs are sized by their per-GPU share, each GPU as fast as one alone: "
                f"{sizing.scaling.note_for(beyond[-1])} (no multi-GPU point measured: `sizer sweep --gpus`)"]
    return [f"rows of {counts} GPUs: per-GPU rate x {sizing.scaling.efficiency_at(measured):.3g}, the efficiency "
            f"measured at {measured} GPUs, {sizing.scaling.note_for(beyond[-1])}"]


def _row_options(sizing: _Sizing, row: InstanceType) -> list[Option]:
    """One option per disk class the row can use (none for a class the disk table does not know)."""
    share = _Share.of(row, _footprint(sizing.fit), sizing.scaling)
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
    pred = sizing.predict(max(share.vcpus, 1e-9), share.cache_ram_gib, bw)
    figure = None if sizing.judge is None else sizing.judge.figure(pred, share.vcpus, share.cache_ram_gib, disk,
                                                                    share.gpus)
    if figure is not None and share.efficiency != 1.0:
        figure = figure.scaled(share.efficiency)  # an instance of several GPUs is judged loaded
    x = pred.throughput * share.efficiency if figure is None else figure.rate
    bottleneck = pred.bottleneck
    if bottleneck in ("disk", "memory") and pred.ram_needed_gib is not None and x > 0:
        # More RAM is the lever only where some row of this GPU has that much.
        bottleneck = "memory" if pred.ram_needed_gib <= sizing.max_share_ram_gib else "disk"
    meets = sizing.meets(x) if figure is None or sizing.judge is None else sizing.judge.meets(figure)
    if figure is not None and figure.measured is not None and not meets and figure.measured.bottleneck in (
            "cpu", "disk", "memory") and bottleneck == "gpu":
        bottleneck = figure.measured.bottleneck  # the measurement saw what the model did not
    if not meets and bottleneck == "gpu" and share.efficiency < 1.0:
        bottleneck = "load"  # one GPU alone would be fed: the loaded host falls short
    cost_per_million = None if share.price is None or x <= 0 else share.price / (x * 3600.0) * 1e6
    hours = cost = None
    if sizing.job_samples and x > 0:
        hours = sizing.job_samples / x / 3600.0
        cost = None if share.price is None else hours * share.price
    option = Option(row, disk, x, bottleneck, meets, cost_per_million, hours, cost, "",
                    share.vcpus, share.memory_gib, share.price, bw, gpu_efficiency=share.efficiency,
                    scaling_note=share.scaling_note, load_basis=share.loaded.basis,
                    extrapolated=share.vcpus > (sizing.fit.measured_vcpus_max or share.vcpus))
    if figure is not None and sizing.judge is not None:
        _add_figure(option, figure, sizing.judge)
        if option.model_predicted is not None:
            option.model_predicted *= share.efficiency
    option.reason = "; ".join(_option_reasons(sizing, option, share, pred.ram_needed_gib))
    option.at_lower_bound = lower_bound_reached(option.predicted, sizing.fit)
    option.why_not = "" if option.meets else _why_not(sizing, option)
    return option


def _why_not(sizing: _Sizing, option: Option) -> str:
    """Why an option whose figure meets the tolerance falls short, in a few words: not judged, only
    at the optimistic end of its range, or a ceiling the model cannot show reached ("": its figure
    is below the bound, which its bottleneck explains)."""
    if option.basis == "not judged":
        return "not judged: it contains no measured shape and the model is not trusted"
    if not sizing.meets(option.predicted):
        return ""
    if _model_short_of_lower_bound(sizing, option):
        return "the ceiling is a lower bound: the model cannot show a shape reaches it"
    low = option.share_pessimistic
    return ("meets only at the optimistic end" + (f": {low:.0%} at the pessimistic end" if low is not None else ""))

def _extrapolated_words(sizing: _Sizing, option: Option) -> str:
    """Where an option gives each GPU more vCPUs than any measured shape: its figure is extrapolated,
    with its range."""
    low, high = option.share_pessimistic, option.share_optimistic
    span = "" if low is None or high is None else f": {min(low, high):.0%} to {max(low, high):.0%} of the ceiling"
    return "" if not option.extrapolated else (f"extrapolated{span}: no shape with {option.share_vcpus:g} vCPUs was "
                                               f"measured (the most: {sizing.fit.measured_vcpus_max})")


def _option_reasons(sizing: _Sizing, option: Option, share: _Share, ram_needed_gib: float | None) -> list[str]:
    """Why an option stands where it does: its share of the ceiling, what binds it, its disk and price."""
    fit, x, bottleneck = sizing.fit, option.predicted, option.bottleneck
    why = [share.note] if share.note else []
    if x <= 0:
        why.append("the workload's memory footprint does not fit")
    elif option.meets:
        why.append(f"{share_phrase(x, fit)}{_range_text(option)}")
    elif _model_short_of_lower_bound(sizing, option):
        why.append(f"{share_phrase(x, fit)}{_range_text(option)}, the model's figure: the "
                   f"{fit.ceiling_name} is a lower bound, which the model can show a shape falls short of, not reaches")
    else:
        why.append(f"{share_phrase(x, fit)}{_range_text(option)}: {bottleneck}-bound")
        if bottleneck == "memory" and ram_needed_gib:
            why.append(f"about {ram_needed_gib:.3g} GiB would cache enough of the dataset")
    peak = fit.usl_peak_vcpus()
    if peak is not None and share.vcpus > peak and bottleneck == "cpu":
        why.append(f"more than about {peak:.0f} input workers slow the pipeline down: run that many")
    extrapolated = _extrapolated_words(sizing, option)
    if extrapolated:
        why.append(extrapolated)
    if option.disk_class != LOCAL_NVME:
        types = disk_types_for(option.instance.cloud, option.disk_class)
        if types:
            why.append(f"{option.disk_class} on {option.instance.cloud}: {', '.join(types)}")
    if share.price is None:
        why.append("no price: listed, but cannot be recommended on price")
    return why


def _add_figure(option: Option, figure: ShapeFigure, judge: Judge) -> None:
    """What the option's figure rests on, and its share of the ceiling at both ends of its range."""
    option.basis = figure.basis
    option.model_predicted = figure.model
    option.share_pessimistic, option.share_optimistic = figure.share_pessimistic, figure.share_optimistic
    option.meets_optimistic = judge.meets(figure, optimistic=True)
    option.dataset_cached = figure.dataset_cached
    if figure.measured is not None and figure.basis != "model above measured floor":
        option.measured_shape = figure.measured.label
        option.measured_disagreement = figure.measured.disagreement()


def _range_text(option: Option) -> str:
    low, high = option.share_pessimistic, option.share_optimistic
    if low is None or high is None or option.predicted <= 0:
        return ""
    span = f" ({min(low, high):.0%} to {max(low, high):.0%})" if f"{low:.0%}" != f"{high:.0%}" else ""
    if option.basis == "not judged":
        return f"{span}, not judged: no measured shape it contains, and the model is not trusted"
    return span + (f", measured at {option.measured_shape}{_cached_words(option)}" if option.measured_shape else "")


def _cached_words(option: Option) -> str:
    """Why a shape measured on another disk judges the option: its page cache holds the dataset."""
    if not option.dataset_cached or option.measured_shape.endswith(f"/ {option.disk_class}"):
        return ""
    return " (its page cache holds the dataset: its own disk is read in the first pass only)"


def _figure_reason(option: Option, confidence: float) -> str:
    """The chosen option's range and what its figure rests on, as a clause of the reason."""
    low, high = option.share_pessimistic, option.share_optimistic
    if low is None or high is None:
        return ""
    basis = {"measured": f"measured at {option.measured_shape}{_cached_words(option)}",
             "measured floor": f"at least as measured at {option.measured_shape}{_cached_words(option)}",
             "model above measured floor": "the model's prediction beyond the measured vCPUs"}.get(option.basis,
                                                                                                 "the model's prediction")
    upto = f" (up to {max(low, high):.0%})" if f"{low:.0%}" != f"{high:.0%}" else ""
    return f"; at {confidence:.0%} confidence at least {min(low, high):.0%} of the ceiling{upto}, {basis}"


def _restated(fit: WorkloadFit) -> bool:
    """Whether the fit predicts a dataset of another size than the one measured (`--dataset-gib`)."""
    stated, measured = fit.value("dataset_gib"), fit.value("measured_dataset_gib")
    return bool(stated and measured and abs(stated - measured) > 1e-9 * measured)


def _model_short_of_lower_bound(sizing: _Sizing, option: Option) -> bool:
    """Whether an option fails only because the model alone judges it against a ceiling that is a
    lower bound (`sizer.model.decision`), its figure meeting the tolerance."""
    return (sizing.judge is not None and sizing.judge.short_of_lower_bound(option.basis)
            and not option.meets and option.predicted > 0 and sizing.meets(option.predicted))


def _shortfall_text(sizing: _Sizing, option: Option) -> str:
    """Why an option whose point figure meets the bound was not chosen: its range, or no judgement."""
    if option.basis == "not judged":
        return "; it contains no measured shape and the model is not trusted"
    low = option.share_pessimistic
    if sizing.judge is None or low is None or option.meets or not sizing.meets(option.predicted):
        return ""
    if _model_short_of_lower_bound(sizing, option):
        return (f"; it contains no measured shape, and the {sizing.fit.ceiling_name} is a lower bound: the model "
                "can show a shape falls short of it, not that it reaches it")
    return f"; at {sizing.judge.confidence:.0%} confidence it may reach only {low:.0%}"


def _untrusted_note(fit: WorkloadFit, tolerance: float) -> str:
    return f"model not trusted: {untrusted_words(fit, tolerance)}; only options that contain a measured shape are judged"


def _disagreements(options: list[Option | None], tolerance: float) -> list[dict[str, Any]]:
    """The measured shapes the decision used where the model misses them by more than the tolerance, once each."""
    out: dict[str, dict[str, Any]] = {}
    for o in options:
        if o is None or o.measured_disagreement is None or abs(o.measured_disagreement) <= tolerance:
            continue
        out.setdefault(o.measured_shape, {"shape": o.measured_shape, "measured": o.predicted,
                                          "model": o.predicted * (1 + o.measured_disagreement),
                                          "difference": o.measured_disagreement})
    return list(out.values())


def _cents(option: Option) -> int:
    """A priced option's price per GPU-hour in whole cents: the grain at which prices are compared."""
    return whole_cents(option.price_per_gpu_hour or 0.0)


def _cheapest_meeting(considered: list[Option], table: dict[str, DiskClass], optimistic: bool = False) -> Option | None:
    """The cheapest priced option that meets the bound (at the optimistic end of its range:
    `optimistic`), by price per GPU-hour in whole cents; among equals: fewer GPUs, the least capable
    disk, the faster, the roomier."""
    meeting = [o for o in considered if (o.meets_optimistic if optimistic else o.meets)
               and o.price_per_gpu_hour is not None]
    if not meeting:
        return None
    return min(meeting, key=lambda o: (_cents(o), o.instance.gpu_count, _disk_rank(o.disk_class, table),
                                       -o.predicted, -o.share_vcpus, -o.share_memory_gib, o.instance.cloud,
                                       o.instance.instance_type))


def _rejected_cheaper(considered: list[Option], chosen: Option, table: dict[str, DiskClass]) -> list[Option]:
    """Every priced row cheaper than the choice: its best disk option, which still falls short."""
    chosen_price = _cents(chosen)
    by_row: dict[tuple, Option] = {}
    for o in considered:
        if o.price_per_gpu_hour is None or _cents(o) >= chosen_price:
            continue
        best = by_row.get(o.instance.key)
        # A judged option (measured, or a trusted model's) speaks for its row before one that is not.
        if best is None or (o.basis != "not judged", o.predicted, -_disk_rank(o.disk_class, table)) > (
                best.basis != "not judged", best.predicted, -_disk_rank(best.disk_class, table)):
            by_row[o.instance.key] = o
    return sorted(by_row.values(), key=lambda o: (_cents(o), o.instance.instance_type))


def _no_choice(sizing: _Sizing, considered: list[Option], gpu: str) -> tuple[Option | None, str]:
    """Where no priced option meets the bound: the fastest priced option, if any (of those judged,
    where the model is not trusted and some are), and why none was chosen."""
    fit = sizing.fit
    priced = [o for o in considered if o.price_per_gpu_hour is not None and o.bottleneck != "gpu-memory"]
    if priced:
        judged = [o for o in priced if o.basis != "not judged"] or priced
        closest = max(judged, key=lambda o: (round(o.predicted, 6), -_cents(o), -o.instance.gpu_count))
        # Where the fastest one's figure meets the bound, what is missing is certainty, not speed.
        shown = "is shown to reach" if sizing.meets(closest.predicted) else "reaches"
        return closest, (f"no {gpu} instance in the catalog {shown} {1 - sizing.tolerance:.0%} of the "
                         f"{fit.ceiling_name} ({_fmt(fit.ceiling)} {fit.unit}); the fastest, "
                         f"{closest.instance.instance_type} with a {closest.disk_class} disk, is predicted at "
                         f"{_fmt(closest.predicted)} {fit.unit} ({share_words(closest.predicted, fit)}), "
                         f"bound by {closest.bottleneck}{_shortfall_text(sizing, closest)}")
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
    footprint = _footprint(sizing.fit)
    big = max(rows, key=lambda r: (r.vcpus / r.gpu_count, shared_cache_ram_gib(r.memory_gib, r.gpu_count, footprint)))
    v, m = big.vcpus / big.gpu_count, shared_cache_ram_gib(big.memory_gib, big.gpu_count, footprint)
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
        f"{_money(chosen.price_per_gpu_hour)} per GPU-hour, {_money(chosen.cost_per_million)} per million "
        f"{unit_noun(unit)}",
    ]
    if inst.gpu_count > 1:
        parts.append(f"sized by its per-GPU share ({chosen.share_vcpus:g} vCPUs, {chosen.share_memory_gib:g} GiB) and "
                     f"judged by its loaded per-GPU figure: {LoadedFigure(1.0, chosen.load_basis).reason}")
    if rejected:
        counts = Counter("not judged" if o.basis == "not judged" else f"{o.bottleneck}-bound" for o in rejected)
        parts.append(f"{len(rejected)} cheaper row(s) fall short: "
                     + ", ".join(f"{n} {why}" for why, n in counts.most_common()))
    if inst.price_source:
        source = inst.price_source.split(";")[0].strip()
        warning = " (WARNING: see the row's price source)" if "WARNING" in inst.price_source else ""
        parts.append(f"price: {source}{', ' + inst.price_date if inst.price_date else ''}{warning}")
    return "; ".join(parts)


def _saving_vs_largest(chosen: Option, considered: list[Option], job_samples: float | None) -> dict[str, Any] | None:
    """The choice against the largest shape of its family (same cloud, GPU and instance family), by
    GPUs, then vCPUs, then RAM; prices per GPU-hour in whole cents. The choice itself is in the pool."""
    inst = chosen.instance
    pool = [o for o in considered if o.price_per_gpu_hour is not None and o.bottleneck != "gpu-memory"
            and o.instance.cloud == inst.cloud and o.instance.family == inst.family] or [chosen]
    largest_row = max((o.instance for o in pool),
                      key=lambda r: (r.gpu_count, r.vcpus, r.memory_gib, r.region == inst.region))
    row_opts = [o for o in pool if o.instance.key == largest_row.key]
    largest = max(row_opts, key=lambda o: (o.predicted, -math.inf if o.disk_mbps is None else 0))
    price_l = largest.price_per_gpu_hour or 0.0  # both priced: the pool and the choice have prices
    cents_l, cents_c = _cents(largest), _cents(chosen)
    out: dict[str, Any] = {
        "basis": f"largest {inst.family} shape",
        "cloud": largest.instance.cloud,
        "instance_type": largest.instance.instance_type,
        "region": largest.instance.region,
        "disk_class": largest.disk_class,
        "gpu_count": largest.instance.gpu_count,
        "vcpus": largest.share_vcpus,
        "memory_gib": largest.share_memory_gib,
        "price_per_hour": price_l,
        "predicted": largest.predicted,
        "cost_per_million": largest.cost_per_million,
        "saving_per_hour": (cents_l - cents_c) / 100,
        "saving_fraction": (cents_l - cents_c) / cents_l if cents_l else None,
        "saving_per_million": (None if largest.cost_per_million is None or chosen.cost_per_million is None
                               else largest.cost_per_million - chosen.cost_per_million),
    }
    if job_samples and largest.job_cost is not None and chosen.job_cost is not None:
        out["job_saving"] = largest.job_cost - chosen.job_cost
    return out
