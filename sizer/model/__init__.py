"""The bottleneck performance model: fit measured points, predict any instance shape.

Per workload (docs/design.md, "The performance model"):

    X(v, m, d) = min( X_gpu,
                      X_cpu(v)   = c * v / (1 + s*(v-1) + k*v*(v-1)),      Universal Scalability Law
                      X_io(d, m) = B_d / (bytes_per_sample * miss(m)) )
    miss(m)    = clamp(1 - (m - footprint) / dataset, 0, 1)                 page-cache miss fraction

Every parameter keeps its physical meaning and says where it came from (`Param.source`): measured
directly (a synthetic-input point gives the GPU ceiling; read bytes, peak RSS and the dataset size
come with the points), taken from the disk-class caps or fio, fitted (scipy least squares on
relative error, with a 95% interval from the Jacobian), or fixed because the points cannot identify
it (said in `Param.note`). Leave-one-out error tells how well the model predicts a shape it did not
see. A smooth minimum (a p-norm) replaces `min` only when it predicts held-out points better.

The package is pure: points in, fits out; nothing is read or written. Its parts:
- `equations`: the terms, the binding term, the page-cache miss, `cpu_scale`;
- `types`: `Param`, `Prediction`, `WorkloadFit` (which predicts a shape);
- `grouping`: which points are fitted together (one group per workload variant);
- `cpu_cost`: the shared host's changing CPU speed taken out of CPU-bound points;
- `measured`, `problem`, `identify`, `assemble`, `fit`: from a group's measurements to its fit;
- `evaluate`: held-out errors and the shapes predicted worst;
- `tolerance`: the one "within tolerance of the ceiling" rule, and when a model is trusted;
- `evidence`, `decision`: measurements outrank the model: the figure a sizing decision uses;
- `uncertainty`: ranges drawn from the measurements' own spread;
- `level_error`: the model's own held-out error at vCPU counts nobody measured, which widens them.

A fitted ceiling is never below the best measured shape (the median of its passes).
"""

from sizer.model.cpu_cost import BUSY_CPU_UTIL, scale_busy_points, take_out_cpu_cost, window_cpu_speed
from sizer.model.equations import cpu_scale
from sizer.model.evaluate import fit_group, held_out_errors, shape_of, worst_predicted
from sizer.model.fit import fit_points
from sizer.model.grouping import group_points
from sizer.model.tolerance import meets_tolerance, tolerance_target
from sizer.model.types import SOURCES, Param, Prediction, WorkloadFit
from sizer.variants import SYNTHETIC_INPUT

__all__ = [
    "BUSY_CPU_UTIL",
    "SOURCES",
    "SYNTHETIC_INPUT",
    "Param",
    "Prediction",
    "WorkloadFit",
    "cpu_scale",
    "fit_group",
    "fit_points",
    "group_points",
    "held_out_errors",
    "meets_tolerance",
    "scale_busy_points",
    "shape_of",
    "take_out_cpu_cost",
    "tolerance_target",
    "window_cpu_speed",
    "worst_predicted",
]
