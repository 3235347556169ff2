"""One workload's part of the report context: its points measured against the fit, the vCPU knee,
the RAM and disk it needs, the model's parameters, the curves the charts draw and its recommendation.

A workload measured with several decode modes (or inputs, or profiles) is fitted, and so reported,
once per variant: `name` is the fitted group's label (`sizer.variants.Variant.label`)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from sizer.method import method_notes
from sizer.model import WorkloadFit
from sizer.points import Point, unsized_reason
from sizer.report.analysis import busy_host_signs, quality_warnings
from sizer.report.options import considered_options, summary_sentence
from sizer.report.trust import add_point_ranges, model_trust
from sizer.sizing import Sizing, SizingTerms, predict_throughput, recommendation_json, size
from sizer.sizing.knee import measured_disk_classes, measured_knees
from sizer.sizing.ram import out_of_memory
from sizer.values import finite_number, jsonable, significant
from sizer.variants import SYNTHETIC_INPUT

CURVE_POINTS = 60  # samples per fitted curve in the charts


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
        "marks": list(p.marks),  # what else marks the figure: a short window, a busy host (not noise)
        "usable": p.usable,
        "measured": p.throughput,
        "predicted": significant(predicted, 6),
        "error": significant(error, 4),
        "spread": p.spread,
        "bottleneck": p.bottleneck,
        "gpu_util_pct": p.gpu_util_pct,
        "read_mb_per_sample": p.read_mb_per_sample,
        "pass_rates": list(p.pass_rates) or None,  # every measurement of the shape, when more than one
        "parallel": jsonable(p.parallel),  # {"slots", "slot", "gpu"} where measured beside other points
        "real_instance": p.real_instance,  # measured the whole instance (sizer.fleet), not an emulation
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


def _point_rows(points: Sequence[Point], fit: WorkloadFit) -> list[dict[str, Any]]:
    fitted = list(fit.residuals or [])
    residuals = {id(point): float(predicted) for point, predicted in fitted}
    return [_point_row(p, _fitted_prediction(p, residuals, fitted) if p.usable else None) for p in points]


def _curve_vcpus(v_max: int) -> list[float]:
    """vCPU counts a quarter past the largest measured: every count, or CURVE_POINTS evenly spaced."""
    v_top = max(v_max + 1, math.ceil(v_max * 1.25))
    if v_top <= CURVE_POINTS:
        return list(range(1, v_top + 1))
    return [round(1 + i * (v_top - 1) / (CURVE_POINTS - 1), 2) for i in range(CURVE_POINTS)]


def _curves(fit: WorkloadFit, points: Sequence[Point], disks: dict[str, float | None], ram_high: float) -> dict[str, Any]:
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
def _needs(sizing: Sizing) -> dict[str, Any]:
    disk_class, ram_gib = sizing.needs
    chosen = sizing.chosen
    return {
        "vcpus": sizing.knee,
        "disk_class": disk_class,
        "ram_gib": ram_gib,
        "by_disk": jsonable(sizing.ram),
        "chosen_disk_class": chosen.disk_class if chosen else None,
        "chosen_memory_gib": chosen.instance.memory_gib if chosen else None,
        "out_of_memory": jsonable(sizing.out_of_memory),
    }


def _model_summary(fit: WorkloadFit) -> dict[str, Any]:
    params = [
        {
            "name": p.name,
            "value": finite_number(p.value),
            "low": finite_number(p.low),
            "high": finite_number(p.high),
            "unit": p.unit,
            "source": p.source,
            "identifiable": p.identifiable,
            "note": p.note,
        }
        for p in fit.params.values()
    ]
    return {
        "params": params,
        "kind": fit.model,
        "notes": list(fit.notes),
        "n_points": fit.n_points,
        "loo_median_ape": finite_number(fit.loo_median_ape),
        "loo_max_ape": finite_number(fit.loo_max_ape),
        "calibration_ips": finite_number(fit.calibration_ips),
    }


def _ceiling_how(fit: WorkloadFit) -> str:
    param = fit.params.get("gpu_ceiling")
    if param is not None and param.source == "measured":
        return "measured with input already on the device"
    return "fitted: the level the measured points reach"


# ---------------------------------------------------------------------------- the workload's context
def _header(name: str, points: Sequence[Point], fit: WorkloadFit | None, cpu_cost: bool) -> dict[str, Any]:
    usable = [p for p in points if p.usable]
    unit = fit.unit if fit is not None else Counter(p.unit for p in points).most_common(1)[0][0]
    return {
        "workload": name,
        "unit": unit,
        "profiles": sorted({p.profile for p in points if p.profile}),
        "n_points": len(points),
        "n_usable": len(usable),
        "statuses": dict(Counter(p.status for p in points)),
        "disk_classes": measured_disk_classes(points),
        "decodes": sorted({p.decode for p in usable if p.input != SYNTHETIC_INPUT}),
        "fitted": fit is not None,
        "warnings": quality_warnings(points, fit, cpu_cost) + method_notes(points),
        "busy_host": bool(busy_host_signs(points)),
        "n_noisy": sum(1 for p in usable if p.status == "noisy"),
        "marked": dict(Counter(m.split(" (")[0] for p in usable for m in p.marks)),  # e.g. {"short window": 4}
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
        "knee": {"tolerance": tolerance, "by_decode": jsonable(measured_knees(points, None, tolerance)),
                 "predicted_vcpus": None, "range": None},
        "model_trust": None,
        "needs": {"by_disk": [], "disk_class": None, "ram_gib": None, "out_of_memory": jsonable(out_of_memory(points))},
        "model": None,
        "points": [_point_row(p, None) for p in points],
        "curves": {},
        "catalog_rows": [],
        "scaling": None,
        "cpu": None,
        "load": None,
    }


def _fitted_parts(points: Sequence[Point], fit: WorkloadFit, terms: SizingTerms) -> dict[str, Any]:
    sizing = size(points, fit, terms)
    rec = sizing.recommendation
    recommendation = None if rec is None else recommendation_json(rec)
    why_none = sizing.catalog_error if rec is None else (rec.reason if rec.chosen is None else None)
    rows = _point_rows(points, fit)
    add_point_ranges(rows, points, fit, sizing.draws, terms.confidence)
    return {
        "ceiling": sizing.ceiling,
        "ceiling_name": fit.ceiling_name,
        "ceiling_how": _ceiling_how(fit),
        "recommendation": recommendation,
        "no_recommendation": why_none,
        "knee": {
            "tolerance": terms.tolerance,
            "ceiling": sizing.ceiling,
            "by_decode": jsonable(sizing.measured_knees),
            "predicted_vcpus": sizing.knee,
            "predicted_at": {"ram_gib": sizing.inputs.ram_high, "disk_mbps": sizing.inputs.fastest_mbps},
            "range": jsonable(sizing.knee_range),
        },
        "needs": _needs(sizing),
        "model": _model_summary(fit),
        "model_trust": model_trust(fit, terms.tolerance),
        "points": rows,
        "curves": _curves(fit, points, sizing.inputs.disks, sizing.inputs.ram_high / 2),
        "catalog_rows": considered_options(rec),
        "scaling": fit.scaling.summary() if fit.scaling is not None else None,  # sizer.model.scaling
        # Which host measured, which CPU the answer is for, and the translation (sizer.fingerprint).
        "cpu": None if sizing.translation is None else sizing.translation.as_dict(),
        "load": _load(fit),  # how instances of several GPUs get their loaded per-GPU figure (sizer.model.load)
    }


def _load(fit: WorkloadFit) -> dict[str, Any] | None:
    """The load the fit's points saw and how a row of several GPUs is judged loaded."""
    scaling = fit.scaling
    if scaling is None:
        return None
    loaded = scaling.loaded_at(max(2, scaling.measured_gpus))
    return {**(scaling.load.summary() or {}), "basis": loaded.basis, "words": loaded.words}


def workload_context(name: str, points: Sequence[Point], fit: WorkloadFit | None, terms: SizingTerms,
                     cpu_cost: bool = False) -> dict[str, Any]:
    """Everything the report shows of one fitted group of points; `fit` None: too few usable points.
    A group without a usable real-input point is not sized (`sized` false), fitted or not: a
    synthetic-input ceiling alone says nothing of the CPU, disk and RAM an instance needs.
    `cpu_cost`: the fit took each window's CPU cost out (`--cpu-cost`)."""
    sized = fit is not None and unsized_reason(points) is None
    ctx = _header(name, points, fit if sized else None, cpu_cost)
    ctx.update(_fitted_parts(points, fit, terms) if sized and fit is not None else _unfitted_parts(points, terms.tolerance))
    ctx["sized"] = sized
    ctx["summary"] = summary_sentence(name, ctx["unit"], ctx["recommendation"], ctx["no_recommendation"])
    return ctx
