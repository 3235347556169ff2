"""What a recommendation is: each catalog option (an instance with a disk class) as judged, and the
recommendation over them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sizer.catalog import InstanceType
from sizer.levels import DEFAULT_CONFIDENCE


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
    # What the decision rests on (`sizer.model.decision`): the figure's basis, the model's own
    # prediction, the measured shape used, and the share of the ceiling at both ends of its range.
    basis: str = "model"
    model_predicted: float | None = None
    measured_shape: str = ""
    measured_disagreement: float | None = None  # the model against the measured shape used (+: above it)
    share_pessimistic: float | None = None
    share_optimistic: float | None = None
    meets_optimistic: bool = False
    # Its page cache holds the dataset (`WorkloadFit.holds_dataset`): past the first pass its disk is
    # not read, so a shape measured on a faster disk judges it.
    dataset_cached: bool = False
    # A multi-GPU row: its per-GPU rate's factor for the GPU count (sizer.model.scaling), and what that assumes.
    gpu_efficiency: float = 1.0
    scaling_note: str = ""
    # Its figure stands at a ceiling that is only a lower bound: at least the best measured, never "100%".
    at_lower_bound: bool = False
    why_not: str = ""  # where it does not meet the tolerance, why, in a few words
    load_basis: str = "one GPU"  # what its loaded per-GPU figure rests on (`LoadedFigure.basis`)
    extrapolated: bool = False  # more vCPUs per GPU than any measured shape: the model's extrapolation


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
    confidence: float = DEFAULT_CONFIDENCE
    model_trusted: bool = True  # enough shapes held out, their max error within TRUST_FACTOR tolerances
    optimistic: Option | None = None  # the pick at the optimistic end, where it differs from `chosen`
    disagreements: list[dict[str, Any]] = field(default_factory=list)  # model vs measured beyond the tolerance
