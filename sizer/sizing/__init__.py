"""Sizing: the one home of a workload's answers (docs/design.md, "Recommending").

`size(points, fit, terms)` computes, from one fit and one draw of its ranges with the host's
speeds, the vCPU knee and its range, the RAM each disk class needs, and the pick with its range.
The report, `sizer recommend` and the adaptive sweep all call it.

- `target`: the GPU to size for, its catalog rows, the host's speeds over a sweep;
- `knee`: the measured and the predicted knee and the knee's range;
- `ram`: the RAM each disk class needs, the shapes the memory limit killed;
- `size`: `SizingTerms`, `Sizing` and `size`;
- `forms`: the one JSON form of a recommendation and its options.
"""

from sizer.sizing.forms import option_json, recommendation_json
from sizer.sizing.knee import KneeInputs, KneeRangeSummary, MeasuredKnee, disk_order, knee_inputs, predict_throughput
from sizer.sizing.ram import DiskNeed, OutOfMemory
from sizer.sizing.size import Sizing, SizingTerms, option_pick, size
from sizer.sizing.target import (
    DEFAULT_TARGET_GPU,
    host_gpu_names,
    measured_fingerprint,
    sweep_host_speeds,
    target_catalog,
    target_gpu,
)

__all__ = [
    "DEFAULT_TARGET_GPU",
    "DiskNeed",
    "KneeInputs",
    "KneeRangeSummary",
    "MeasuredKnee",
    "OutOfMemory",
    "Sizing",
    "SizingTerms",
    "disk_order",
    "host_gpu_names",
    "knee_inputs",
    "measured_fingerprint",
    "option_json",
    "option_pick",
    "predict_throughput",
    "recommendation_json",
    "size",
    "sweep_host_speeds",
    "target_catalog",
    "target_gpu",
]
