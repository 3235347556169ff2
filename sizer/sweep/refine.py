"""`sizer sweep --refine N`: after the passes, the shapes each workload's model predicts worst,
measured once more."""

from __future__ import annotations

import dataclasses
from typing import Any

from sizer.model import worst_predicted
from sizer.shapes import PlannedPoint, shape_key
from sizer.store import point_from_result
from sizer.sweep.plan import SweepPlan
from workloads.protocol import Result


def refine_points(plan: SweepPlan, results: list[tuple[Any, Result]]) -> list[tuple[PlannedPoint, float]]:
    """`--refine N`: pass K+1 (K: the plan's passes) of each workload's N shapes that its model,
    fitted on the passes without them, predicts worst (`model.worst_predicted`), with that error. A
    shape whose passes ran at a slow or fast moment of a shared host is measured once more, so its
    median moves toward the host's usual speed; what the sweep's other shapes say it should be
    chooses it, not the spread of its own figures (both passes can land on one moment). Only the
    first K passes' measurements choose, so a resumed sweep chooses the same shapes."""
    measured = [point for point in (point_from_result(row, result) for row, result in results)
                if point.pass_no <= plan.passes]
    if not measured:
        return []
    first_pass = {p.key: p for p in plan.points if p.pass_no == 1 and not p.ceiling}
    chosen = []
    for point, error in worst_predicted(measured, plan.disk_table, plan.refine):
        planned = first_pass.get(shape_key(point.key))
        if planned is not None:
            chosen.append((dataclasses.replace(planned, pass_no=plan.passes + 1), error))
    return chosen
