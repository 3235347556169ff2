"""The one JSON form of a recommendation and of each option in it: `sizer recommend --json` and the
report's results.json both write these."""

from __future__ import annotations

from typing import Any

from sizer.recommend import Option, Recommendation
from sizer.values import finite_number, jsonable, significant


def option_json(option: Option, ceiling: float | None) -> dict[str, Any]:
    """One catalog option (an instance with one disk class) and what sizer predicts on it; a
    multi-GPU row is sized and priced by its per-GPU share (what one GPU's workload gets)."""
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
        "price_per_gpu_hour": finite_number(option.price_per_gpu_hour),
        "share_vcpus": finite_number(option.share_vcpus),
        "share_memory_gib": finite_number(option.share_memory_gib),
        "disk_mbps": finite_number(option.disk_mbps),
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
        "basis": option.basis,
        "model_predicted": significant(finite_number(option.model_predicted), 6),
        "measured_shape": option.measured_shape or None,
        "share_pessimistic": significant(finite_number(option.share_pessimistic), 4),
        "share_optimistic": significant(finite_number(option.share_optimistic), 4),
        "meets_optimistic": bool(option.meets_optimistic),
        "dataset_cached": bool(option.dataset_cached),
        # A multi-GPU row's per-GPU rate factor for its GPU count, and what it assumes (sizer.model.scaling).
        "gpu_efficiency": significant(finite_number(option.gpu_efficiency), 4),
        "scaling_note": option.scaling_note or None,
        # Its figure stands at a ceiling that is only a lower bound: say "at least the best measured".
        "at_lower_bound": bool(option.at_lower_bound),
        "why_not": option.why_not or None,
        # What a multi-GPU row's loaded per-GPU figure rests on ("one GPU" for a one-GPU row), and
        # whether its vCPUs per GPU lie beyond every measured shape (its figure extrapolated).
        "load_basis": option.load_basis,
        "extrapolated": bool(option.extrapolated),
    }


def recommendation_json(rec: Recommendation) -> dict[str, Any]:
    """A recommendation: the chosen, closest and optimistic options, the cheaper ones rejected, and why."""
    ceiling = finite_number(rec.ceiling)

    def one(option: Option | None) -> dict[str, Any] | None:
        return None if option is None else option_json(option, ceiling)

    return {
        "workload": rec.workload,
        "unit": rec.unit,
        "gpu": rec.gpu,
        "ceiling": ceiling,
        "ceiling_name": rec.ceiling_name,
        "tolerance": rec.tolerance,
        "confidence": rec.confidence,
        "chosen": one(rec.chosen),
        "closest": one(rec.closest),
        "optimistic": one(rec.optimistic),
        "rejected_cheaper": [option_json(o, ceiling) for o in rec.rejected_cheaper],
        "considered_count": len(rec.considered),
        "saving_vs_largest": jsonable(rec.saving_vs_largest),
        "reason": rec.reason,
        "needs_local_nvme": bool(rec.needs_local_nvme),
        "model_trusted": bool(rec.model_trusted),
        "notes": list(rec.notes),
        "disagreements": jsonable(rec.disagreements),
    }
