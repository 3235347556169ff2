"""Every GPU type the catalogs sell, ranked by cost per million samples for each workload
(`sizer.sizing.across_gpus`), measured or predicted, each with its vCPU, RAM and disk answer and its
range, in the JSON form `sizer recommend --gpu any` and the report's first table share; and how a
workload's ceiling is carried to other GPUs (its recorded kernel split, else the analytic count)."""

from __future__ import annotations

import importlib.util
from typing import Any, Sequence

from sizer.catalog import InstanceType
from sizer.gpu_table import load_gpu_table
from sizer.model import WorkloadFit
from sizer.model.gpu_speed import recorded_split, split_for
from sizer.points import Point
from sizer.sizing import SizingTerms, option_json
from sizer.sizing.across_gpus import GpuChoice, SplitSource, rank_gpus
from sizer.values import significant
from workloads.fake_step import analytic_costs

ANY_GPU = "any"


def _split_source(points: Sequence[Point], fit: WorkloadFit) -> SplitSource | None:
    """How the workload's ceiling is carried to other GPUs: the kernel split its ceiling point
    recorded, else the analytic count of its step (which needs torch); None where neither is had."""
    record = recorded_split(points)
    table = load_gpu_table()
    if record is None and importlib.util.find_spec("torch") is None:
        return None
    workload = points[0].workload

    def split() -> Any:
        return split_for(record, fit.ceiling, table.get(fit.gpu_model), analytic=lambda: analytic_costs(workload))

    return split


def _choice_json(choice: GpuChoice, unit: str) -> dict[str, Any]:
    sizing = choice.sizing
    rec = None if sizing is None else sizing.recommendation
    chosen = choice.chosen
    disk_class, ram_gib = (None, None) if sizing is None else sizing.needs
    return {
        "gpu": choice.gpu,
        "basis": choice.basis,
        "ceiling": significant(choice.ceiling, 6),
        "ceiling_low": significant(choice.ceiling_low, 6),
        "ceiling_high": significant(choice.ceiling_high, 6),
        "unit": unit,
        "chosen": None if chosen is None or rec is None else option_json(chosen, rec.ceiling),
        "knee": None if sizing is None else {"vcpus": sizing.knee, "low": sizing.knee_range.low,
                                             "high": sizing.knee_range.high},
        "needs": None if sizing is None else {"disk_class": disk_class, "ram_gib": ram_gib},
        "reason": choice.left_out or ("" if rec is None else rec.reason),
        "left_out": bool(choice.left_out),
    }


def rank_workload(name: str, points: Sequence[Point], fit: WorkloadFit, catalog: Sequence[InstanceType],
                  terms: SizingTerms, min_rate: float | None) -> dict[str, Any]:
    """One workload's ranking across GPU types, in its JSON form."""
    if not fit.uses_gpu:
        return {"workload": name, "unit": fit.unit, "ranking": [],
                "reason": "it runs no GPU: every GPU type serves it alike, so its host decides (size it for one GPU)"}
    choices = rank_gpus(points, fit, catalog, terms, load_gpu_table(), _split_source(points, fit), min_rate)
    return {"workload": name, "unit": fit.unit, "ranking": [_choice_json(c, fit.unit) for c in choices], "reason": ""}
