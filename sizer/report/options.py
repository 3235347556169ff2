"""A workload's recommendation in the report: the catalog options considered, the one chosen and
the sentence that says why, each figure taken from `sizer.recommend`'s answer."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sizer.catalog import whole_cents
from sizer.errors import SizerError
from sizer.report.values import finite_number, jsonable, significant


def option_row(option: Any, ceiling: float | None) -> dict[str, Any]:
    """One catalog option (an instance with one disk class) and what the model predicts on it."""
    inst = option.instance
    predicted = finite_number(option.predicted)
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
        "price_per_hour": finite_number(inst.price_per_hour),
        # A multi-GPU row is sized and priced by its per-GPU share (what one GPU's workload gets).
        "price_per_gpu_hour": finite_number(getattr(option, "price_per_gpu_hour", None)),
        "share_vcpus": finite_number(getattr(option, "share_vcpus", None)) or inst.vcpus,
        "share_memory_gib": finite_number(getattr(option, "share_memory_gib", None)) or inst.memory_gib,
        "disk_mbps": finite_number(getattr(option, "disk_mbps", None)),
        "price_source": inst.price_source,
        "price_date": inst.price_date,
        "disk_class": option.disk_class,
        "predicted": significant(predicted, 6),
        "fraction_of_ceiling": significant(predicted / ceiling, 4) if predicted is not None and ceiling else None,
        "bottleneck": option.bottleneck,
        "meets": bool(option.meets),
        "cost_per_million": finite_number(option.cost_per_million),
        "job_hours": finite_number(option.job_hours),
        "job_cost": finite_number(option.job_cost),
        "reason": option.reason,
        # What the figure rests on, and its share of the ceiling at both ends of its range.
        "basis": getattr(option, "basis", "model"),
        "model_predicted": significant(finite_number(getattr(option, "model_predicted", None)), 6),
        "measured_shape": getattr(option, "measured_shape", "") or None,
        "share_pessimistic": significant(finite_number(getattr(option, "share_pessimistic", None)), 4),
        "share_optimistic": significant(finite_number(getattr(option, "share_optimistic", None)), 4),
        "meets_optimistic": bool(getattr(option, "meets_optimistic", False)),
        "dataset_cached": bool(getattr(option, "dataset_cached", False)),
        # A multi-GPU row's per-GPU rate factor for its GPU count, and what it assumes (sizer.model.scaling).
        "gpu_efficiency": significant(finite_number(getattr(option, "gpu_efficiency", 1.0)), 4),
        "scaling_note": getattr(option, "scaling_note", "") or None,
    }


def recommendation_summary(rec: Any) -> dict[str, Any]:
    """`sizer.recommend`'s answer as report data: the chosen and closest options, the cheaper ones rejected."""
    ceiling = finite_number(rec.ceiling)
    closest = getattr(rec, "closest", None)
    return {
        "gpu": rec.gpu,
        "ceiling": ceiling,
        "ceiling_name": getattr(rec, "ceiling_name", "GPU ceiling"),
        "tolerance": rec.tolerance,
        "chosen": option_row(rec.chosen, ceiling) if rec.chosen is not None else None,
        "closest": option_row(closest, ceiling) if closest is not None else None,
        "notes": list(getattr(rec, "notes", []) or []),
        "rejected_cheaper": [option_row(o, ceiling) for o in rec.rejected_cheaper],
        "considered_count": len(rec.considered),
        "saving_vs_largest": jsonable(rec.saving_vs_largest),
        "reason": rec.reason,
        "needs_local_nvme": bool(rec.needs_local_nvme),
        "confidence": getattr(rec, "confidence", None),
        "model_trusted": bool(getattr(rec, "model_trusted", True)),
        "optimistic": option_row(rec.optimistic, ceiling) if getattr(rec, "optimistic", None) is not None else None,
        "disagreements": jsonable(getattr(rec, "disagreements", [])),
    }


def _price_order(option: dict[str, Any]) -> tuple:
    """Cheapest per GPU-hour in whole cents first (as the recommendation compares them), fewer GPUs
    first among equal prices, unpriced rows last."""
    price = option["price_per_gpu_hour"]
    return (price is None, whole_cents(price or 0.0), option["gpu_count"], option["cloud"],
            option["instance_type"], option["disk_class"])


def recommend_options(fit: Any, catalog: Any, target: str, *, tolerance: float, disk_classes: dict[str, Any],
                      job_samples: float | None, confidence: float | None = None
                      ) -> tuple[dict[str, Any] | None, str | None, list[dict[str, Any]]]:
    """The recommendation, why there is none (or None), and every option considered, cheapest first.
    A catalog that cannot be sized (a SizerError) leaves no recommendation, its message the reason."""
    from sizer.model.tolerance import DEFAULT_CONFIDENCE
    from sizer.recommend import recommend

    recommendation, why_none = None, None
    try:
        rec = recommend(fit, catalog, target, tolerance=tolerance, disk_classes=disk_classes, job_samples=job_samples,
                        confidence=DEFAULT_CONFIDENCE if confidence is None else confidence)
        recommendation = recommendation_summary(rec)
        if rec.chosen is None:
            why_none = rec.reason
        considered = [option_row(o, finite_number(rec.ceiling)) for o in rec.considered]
    except SizerError as exc:
        why_none, considered = str(exc), []
    considered.sort(key=_price_order)
    return recommendation, why_none, considered


def _figure_words(option: dict[str, Any], unit: str) -> str:
    """Where the chosen option's figure comes from, in words: a measurement outranks the model."""
    basis, shape = option.get("basis"), option.get("measured_shape")
    if basis == "measured" and shape:
        return f"Measured at {shape}: {option['predicted']:,.0f} {unit}"
    if basis == "measured floor" and shape:
        return f"At least the {option['predicted']:,.0f} {unit} measured at {shape}"
    return f"The model predicts {option['predicted']:,.0f} {unit}"


def _range_words(option: dict[str, Any], confidence: float | None) -> str:
    low, high = option.get("share_pessimistic"), option.get("share_optimistic")
    if confidence is None or low is None or high is None or f"{low:.0%}" == f"{high:.0%}":
        return ""
    return f"; at {confidence:.0%} confidence {min(low, high):.0%} to {max(low, high):.0%}"


def summary_sentence(name: str, unit: str, rec: dict[str, Any] | None, why_none: str | None) -> str:
    """The recommendation in plain words, from the figures alone."""
    if rec is None or rec["chosen"] is None:
        reason = why_none or (rec or {}).get("reason") or "no catalog row meets the bound"
        return f"No instance is recommended for {name}: {reason}." + _optimistic_words(rec)
    c = rec["chosen"]
    ceiling_name = rec.get("ceiling_name", "GPU ceiling")
    parts = [
        f"Choose {c['instance_type']} ({c['cloud']}, {c['region']}) with {c['disk_class']} storage.",
        _figure_words(c, unit)
        + (f", {c['fraction_of_ceiling']:.0%} of the {ceiling_name} ({rec['ceiling']:,.0f} {unit})"
           if c.get("fraction_of_ceiling") is not None else "")
        + _range_words(c, rec.get("confidence")) + ".",
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
    return " ".join(parts) + _optimistic_words(rec)


def _optimistic_words(rec: dict[str, Any] | None) -> str:
    """The pick at the optimistic end of the ranges, where it differs from the one made."""
    other = (rec or {}).get("optimistic")
    if not other:
        return ""
    return (f" At the optimistic end of the ranges, {other['instance_type']} ({other['cloud']}) with "
            f"{other['disk_class']} storage would do.")
