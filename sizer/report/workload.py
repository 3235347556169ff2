"""One workload's part of the report context: its points measured against the fit, the vCPU knee,
the RAM and disk it needs, the model's parameters, the curves the charts draw and its recommendation.

A workload measured with several decode modes (or inputs, or profiles) is fitted, and so reported,
once per variant: `name` is the fitted group's label (`sizer.variants.Variant.label`)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from sizer.confidence import DEFAULT_CONFIDENCE
from sizer.method import method_notes
from sizer.points import Point, unsized_reason
from sizer.report.analysis import (
    busy_host_signs,
    fit_ceiling,
    out_of_memory,
    predict_throughput,
    predicted_knee,
    quality_warnings,
    ram_needs,
    vcpu_knee,
)
from sizer.report.options import recommend_options, summary_sentence
from sizer.report.trust import add_point_ranges, knee_range_summary, model_trust
from sizer.report.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT

CURVE_POINTS = 60  # samples per fitted curve in the charts


@dataclass(frozen=True)
class SizingTerms:
    """What every workload of a report is sized against: the target GPU's catalog rows and the options."""

    catalog: Sequence[Any]
    target: str
    tolerance: float
    disk_classes: dict[str, Any]
    dataset_gib: float | None = None
    job_samples: float | None = None
    cpu_cost: bool = False
    confidence: float = DEFAULT_CONFIDENCE  # the level of every range and of the pick
    # Each sweep's calibration repeats over its run (`calibration["timeline"]`): the host's speed, which
    # widens the knee range where it moved more than the measurements did.
    host_speeds: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True)
class _Sizing:
    """The model's answers for one fitted workload, at ample RAM and the fastest measured disk."""

    ceiling: float | None
    disks: dict[str, float | None]  # measured disk class -> the read rate the fit gives it (MB/s)
    fastest_mbps: float | None
    ram_high: float  # the RAM the knee is predicted at and the RAM search's upper end (GiB)
    knee_vcpus: int | None
    by_disk: list[dict[str, Any]]
    search_top: int  # the most vCPUs the knee is sought at


def disk_order(name: str) -> tuple[int, str]:
    """Fastest canonical disk class first, other classes after them by name."""
    order = {"local-nvme": 0, "ssd": 1, "standard": 2}
    return (order.get(name, 3), name)


def _measured_disk_classes(points: Sequence[Point]) -> list[str]:
    return sorted({p.disk_class for p in points}, key=disk_order)


# ---------------------------------------------------------------------------- points and curves
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
        "predicted": significant(predicted, 6),
        "error": significant(error, 4),
        "spread": p.spread,
        "bottleneck": p.bottleneck,
        "gpu_util_pct": p.gpu_util_pct,
        "read_mb_per_sample": p.read_mb_per_sample,
        "pass_rates": p.extra.get("pass_rates"),  # every measurement of the shape, when more than one
        "parallel": p.extra.get("parallel"),  # {"slots", "slot", "gpu"} where measured beside other points
        "real_instance": bool(p.extra.get("real_instance")),  # measured the whole instance (sizer.fleet), not an emulation
    }


def _same_shape_and_figure(a: Point, b: Point) -> bool:
    return (a.vcpus, a.ram_gib, a.disk_class, a.decode, a.input, a.throughput) == (
        b.vcpus, b.ram_gib, b.disk_class, b.decode, b.input, b.throughput)


def _fitted_prediction(p: Point, residuals: dict[int, float], fitted: list[tuple[Point, float]]) -> float | None:
    """The fit's prediction for a measured point: by identity, else by shape and figure (the model
    may have copied the points)."""
    if id(p) in residuals:
        return residuals[id(p)]
    return next((float(predicted) for point, predicted in fitted if _same_shape_and_figure(point, p)), None)


def _point_rows(points: Sequence[Point], fit: Any) -> list[dict[str, Any]]:
    fitted = list(fit.residuals or [])
    residuals = {id(point): float(predicted) for point, predicted in fitted}
    return [_point_row(p, _fitted_prediction(p, residuals, fitted) if p.usable else None) for p in points]


def _curve_vcpus(v_max: int) -> list[float]:
    """vCPU counts a quarter past the largest measured: every count, or CURVE_POINTS evenly spaced."""
    v_top = max(v_max + 1, math.ceil(v_max * 1.25))
    if v_top <= CURVE_POINTS:
        return list(range(1, v_top + 1))
    return [round(1 + i * (v_top - 1) / (CURVE_POINTS - 1), 2) for i in range(CURVE_POINTS)]


def _curves(fit: Any, points: Sequence[Point], disks: dict[str, float | None], ram_high: float) -> dict[str, Any]:
    """The fit sampled per disk class over vCPUs (at the largest measured RAM) and over RAM (at the
    largest measured vCPU count): what the charts draw."""
    usable = [p for p in points if p.usable]
    if not usable:
        return {}
    ram_at = max(p.ram_gib for p in usable)
    v_max = max(p.vcpus for p in usable)
    vcpus = _curve_vcpus(v_max)
    ram_top = max(ram_high, ram_at * 1.15)
    rams = [round(ram_top * (i + 1) / CURVE_POINTS, 3) for i in range(CURVE_POINTS)]

    def sampled(v: float, r: float, mbps: float | None) -> float | None:
        return significant(predict_throughput(fit, v, r, mbps), 6)

    return {
        "vcpu": {
            "ram_gib": ram_at,
            "vcpus": vcpus,
            "by_disk": {d: [sampled(v, ram_at, mbps) for v in vcpus] for d, mbps in disks.items()},
        },
        "ram": {
            "vcpus": v_max,
            "ram_gib": rams,
            "by_disk": {d: [sampled(v_max, r, mbps) for r in rams] for d, mbps in disks.items()},
        },
    }


# ---------------------------------------------------------------------------- sizing
@dataclass(frozen=True)
class KneeInputs:
    """Where the model's vCPU knee is sought: each measured disk class's read rate as the fit gives it
    (MB/s), the fastest of them, twice the RAM the workload could want, and the most vCPUs measured
    (the search goes to four times that, at least 64)."""

    disks: dict[str, float | None]
    fastest_mbps: float | None
    ram_high: float
    vcpus_max: int

    @property
    def search_top(self) -> int:
        return max(self.vcpus_max * 4, 64)


def knee_inputs(points: Sequence[Point], fit: Any, dataset_gib: float | None = None) -> KneeInputs:
    """The knee's inputs (`KneeInputs`) for a fit of `points` (`dataset_gib`: a stated dataset size)."""
    usable = [p for p in points if p.usable]
    disks = {d: fit.disk_mbps(d) for d in _measured_disk_classes(points)}
    fastest = max(disks.values(), key=lambda m: math.inf if m is None else m) if disks else None
    max_ram = max((p.ram_gib for p in usable), default=1.0)
    footprint = finite_number(getattr(fit.params.get("footprint_gib"), "value", None)) or 0.0
    v_max = max((p.vcpus for p in usable), default=1)
    return KneeInputs(disks, fastest, max(max_ram, (dataset_gib or 0.0) + footprint) * 2, v_max)


def _size(points: Sequence[Point], fit: Any, terms: SizingTerms) -> _Sizing:
    """The predicted knee at twice the RAM the workload could want, and per disk class the RAM it needs."""
    ceiling = fit_ceiling(fit)
    at = knee_inputs(points, fit, terms.dataset_gib)
    knee = predicted_knee(fit, ceiling, terms.tolerance, at.ram_high, at.fastest_mbps, at.search_top)
    by_disk = ram_needs(fit, ceiling, terms.tolerance, knee or at.vcpus_max, at.disks, at.ram_high)
    return _Sizing(ceiling, at.disks, at.fastest_mbps, at.ram_high, knee, by_disk, at.search_top)


def _needs(points: Sequence[Point], sizing: _Sizing, chosen: dict[str, Any] | None) -> dict[str, Any]:
    reachable = [d for d in sizing.by_disk if d["min_ram_gib"] is not None]
    least_ram = min((d["min_ram_gib"] for d in reachable), default=None)
    # The slowest disk class that needs no more RAM than the best one: what the workload needs.
    slowest_ok = sorted((d for d in reachable if d["min_ram_gib"] == least_ram),
                        key=lambda d: math.inf if d["disk_mbps"] is None else d["disk_mbps"])
    return {
        "vcpus": sizing.knee_vcpus,
        "disk_class": slowest_ok[0]["disk_class"] if slowest_ok else None,
        "ram_gib": least_ram,
        "by_disk": sizing.by_disk,
        "chosen_disk_class": chosen["disk_class"] if chosen else None,
        "chosen_memory_gib": chosen["memory_gib"] if chosen else None,
        "out_of_memory": out_of_memory(points),
    }


def _model_summary(fit: Any) -> dict[str, Any]:
    params = [
        {
            "name": p.name,
            "value": finite_number(p.value),
            "low": finite_number(p.low),
            "high": finite_number(p.high),
            "unit": p.unit,
            "source": p.source,
            "identifiable": bool(getattr(p, "identifiable", True)),
            "note": getattr(p, "note", ""),
        }
        for p in fit.params.values()
    ]
    return {
        "params": params,
        "kind": getattr(fit, "model", "min"),
        "notes": list(getattr(fit, "notes", []) or []),
        "n_points": fit.n_points,
        "loo_median_ape": finite_number(fit.loo_median_ape),
        "loo_max_ape": finite_number(fit.loo_max_ape),
        "calibration_ips": finite_number(fit.calibration_ips),
    }


def _ceiling_how(fit: Any) -> str:
    param = fit.params.get("gpu_ceiling")
    if param is not None and param.source == "measured":
        return "measured with input already on the device"
    return "fitted: the level the measured points reach"


# ---------------------------------------------------------------------------- the workload's context
def _header(name: str, points: Sequence[Point], fit: Any, cpu_cost: bool) -> dict[str, Any]:
    usable = [p for p in points if p.usable]
    unit = fit.unit if fit is not None else Counter(p.unit for p in points).most_common(1)[0][0]
    return {
        "workload": name,
        "unit": unit,
        "profiles": sorted({p.profile for p in points if p.profile}),
        "n_points": len(points),
        "n_usable": len(usable),
        "statuses": dict(Counter(p.status for p in points)),
        "disk_classes": _measured_disk_classes(points),
        "decodes": sorted({p.decode for p in usable if p.input != SYNTHETIC_INPUT}),
        "fitted": fit is not None,
        "warnings": quality_warnings(points, fit, cpu_cost) + method_notes(points),
        "busy_host": bool(busy_host_signs(points)),
        "n_noisy": sum(1 for p in usable if p.status == "noisy"),
    }


def _unfitted_parts(points: Sequence[Point], tolerance: float) -> dict[str, Any]:
    n_usable = sum(1 for p in points if p.usable)
    return {
        "ceiling": None,
        "ceiling_name": "ceiling",
        "ceiling_how": None,
        "recommendation": None,
        "no_recommendation": unsized_reason(points)
        or f"too few usable points to fit a model ({n_usable} of {len(points)})",
        "knee": {"tolerance": tolerance, "by_decode": vcpu_knee(points, None, tolerance), "predicted_vcpus": None,
                 "range": None},
        "model_trust": None,
        "needs": {"by_disk": [], "disk_class": None, "ram_gib": None, "out_of_memory": out_of_memory(points)},
        "model": None,
        "points": [_point_row(p, None) for p in points],
        "curves": {},
        "catalog_rows": [],
        "scaling": None,
    }


def _fitted_parts(points: Sequence[Point], fit: Any, terms: SizingTerms) -> dict[str, Any]:
    from sizer.model.uncertainty import fit_draws, host_speeds

    sizing = _size(points, fit, terms)
    recommendation, why_none, considered = recommend_options(
        fit, terms.catalog, terms.target, tolerance=terms.tolerance, disk_classes=terms.disk_classes,
        job_samples=terms.job_samples, confidence=terms.confidence)
    chosen = (recommendation or {}).get("chosen")
    draws = fit_draws(fit, host=host_speeds([list(ips) for ips in terms.host_speeds]))
    rows = _point_rows(points, fit)
    add_point_ranges(rows, points, fit, draws, terms.confidence)
    by_decode = vcpu_knee(points, sizing.ceiling, terms.tolerance, fit.ceiling_name)
    return {
        "ceiling": sizing.ceiling,
        "ceiling_name": fit.ceiling_name,
        "ceiling_how": _ceiling_how(fit),
        "recommendation": recommendation,
        "no_recommendation": why_none if chosen is None else None,
        "knee": {
            "tolerance": terms.tolerance,
            "ceiling": sizing.ceiling,
            "by_decode": by_decode,
            "predicted_vcpus": sizing.knee_vcpus,
            "predicted_at": {"ram_gib": sizing.ram_high, "disk_mbps": sizing.fastest_mbps},
            "range": knee_range_summary(fit, draws, terms.tolerance, terms.confidence, sizing.ram_high,
                                        sizing.fastest_mbps, sizing.search_top, by_decode),
        },
        "needs": _needs(points, sizing, chosen),
        "model": _model_summary(fit),
        "model_trust": model_trust(fit, terms.tolerance),
        "points": rows,
        "curves": _curves(fit, points, sizing.disks, sizing.ram_high / 2),
        "catalog_rows": considered,
        "scaling": fit.scaling.summary() if fit.scaling is not None else None,  # sizer.model.scaling
    }


def workload_context(name: str, points: Sequence[Point], fit: Any, terms: SizingTerms) -> dict[str, Any]:
    """Everything the report shows of one fitted group of points; `fit` None: too few usable points.
    A group without a usable real-input point is not sized (`sized` false), fitted or not: a
    synthetic-input ceiling alone says nothing of the CPU, disk and RAM an instance needs."""
    sized = fit is not None and unsized_reason(points) is None
    ctx = _header(name, points, fit if sized else None, terms.cpu_cost)
    ctx.update(_fitted_parts(points, fit, terms) if sized else _unfitted_parts(points, terms.tolerance))
    ctx["sized"] = sized
    ctx["summary"] = summary_sentence(name, ctx["unit"], ctx["recommendation"], ctx["no_recommendation"])
    return ctx
