"""How well the model predicts what it did not see: held-out errors per shape, and the shapes each
workload's model predicts worst."""

from __future__ import annotations

from typing import Any, Callable

from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.model.fit import fit_points
from sizer.model.grouping import group_points
from sizer.model.types import WorkloadFit
from sizer.points import Point, combine_passes
from sizer.variants import SYNTHETIC_INPUT


def shape_of(point: Point) -> tuple:
    """The (vCPUs, RAM, disk class) a point was measured at: what leave-one-shape-out holds out."""
    return (point.vcpus, point.ram_gib, point.disk_class)


def fit_group(name: str, group: list[Point], disk_classes: dict[str, DiskClass], loo: bool = True) -> WorkloadFit | None:
    """The fit of one workload group (`group_points`): fitted alone, a group carries its workload's
    plain name, so the one fit it gives is taken whatever it is called."""
    fits = fit_points(group, disk_classes, loo=loo)
    return fits.get(name) or (next(iter(fits.values())) if len(fits) == 1 else None)


def held_out_errors(name: str, group: list[Point], disk_classes: dict[str, DiskClass],
                    hold: Callable[[Point], Any] = shape_of) -> dict[Any, list[float]]:
    """The absolute relative errors of the points of each key `hold(point)` (a shape by default)
    when the group is fitted without them: how well the model predicts what it did not see.
    Synthetic-input points stay in every fit (they are not shapes); a key whose removal leaves
    fewer than two real points to fit on gets no errors. Compared on the measured dataset."""
    usable = [p for p in group if p.usable]
    real = [p for p in usable if p.input != SYNTHETIC_INPUT]
    errors: dict[Any, list[float]] = {}
    for key in sorted({hold(p) for p in real}, key=str):
        train = [p for p in usable if p.input == SYNTHETIC_INPUT or hold(p) != key]
        if sum(p.input != SYNTHETIC_INPUT for p in train) < 2:
            continue
        fit = fit_group(name, train, disk_classes, loo=False)
        if fit is None:
            continue
        for p in real:
            if hold(p) == key:
                predicted = fit.predict_measured(p)
                errors.setdefault(key, []).append(abs(predicted.throughput - p.throughput) / p.throughput)
    return errors


def worst_predicted(points: list[Point], disk_classes: dict[str, DiskClass], n: int) -> list[tuple[Point, float]]:
    """Each fitted workload's `n` shapes that its model predicts worst when fitted without them
    (leave-one-shape-out, each shape at the median of its measurements): the point that stands for
    each shape (`combine_passes`: the median measurement) with its error, largest first within a
    workload. What `sizer sweep --refine` measures once more."""
    if n < 1:
        raise SizerError(f"--refine wants 1 or more shapes, got {n}")
    out: list[tuple[Point, float]] = []
    for name, group in group_points(combine_passes(points)).items():
        errors = held_out_errors(name, group, disk_classes)
        ranked = sorted(errors, key=lambda key: max(errors[key]), reverse=True)[:n]
        real = [p for p in group if p.usable and p.input != SYNTHETIC_INPUT]
        for key in ranked:
            out.append((next(p for p in real if shape_of(p) == key), max(errors[key])))
    return out
