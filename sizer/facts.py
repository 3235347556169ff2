"""What the registered workloads declare of themselves, handed to the model as data on the points:
whether a workload reads each sample once (`Workload.reads_once`: preprocessing and batch inference
do). The store and the model do not read the registry; the loaders of points add these facts here."""

from __future__ import annotations

import dataclasses
from typing import Iterable

import workloads
from sizer.points import Point


def reads_once_facts() -> dict[str, bool]:
    """Per registered workload (plugins included), whether it reads each sample once."""
    return {name: bool(cls.reads_once) for name, cls in workloads.load_all().items()}


def with_facts(points: Iterable[Point]) -> list[Point]:
    """The points, each that does not say whether its job reads each sample once taking what its
    workload declares; a workload not registered (points of another tool) reads its data every pass."""
    facts = reads_once_facts()
    return [p if p.reads_once is not None else dataclasses.replace(p, reads_once=facts.get(p.workload, False))
            for p in points]
