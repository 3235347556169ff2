"""What an adaptive sweep's choices are judged by (`sizer.sweep.adaptive`): the terms (the sizing's,
the budget, the passes), the answer a set of measurements gives, a step of the chooser, and the
catalog options whose verdict the ranges leave open. Pure."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from sizer.catalog import whole_cents
from sizer.diskclasses import DiskClass
from sizer.model import WorkloadFit, meets_tolerance
from sizer.recommend import Option, Recommendation
from sizer.shapes import InstanceShape, PlannedPoint
from sizer.sizing import Sizing, SizingTerms
from sizer.sweep.strategy import DEFAULT_PASSES

# Why an adaptive sweep stopped measuring an entry (`Step.stopped`).
STOP_STABLE = "stable"
STOP_MAX_POINTS = "max points"
STOP_EXHAUSTED = "grid measured"
STOP_TIME = "time limit"
STOP_REASONS = (STOP_STABLE, STOP_MAX_POINTS, STOP_EXHAUSTED, STOP_TIME)


@dataclass(frozen=True)
class AdaptiveTerms:
    """What the answer is judged against, as the report judges it (`sizer.sizing.SizingTerms`: the
    target GPU's catalog rows, the disk-class table, the tolerance, the confidence level and the
    host's speeds over the sweep); the budget of measurements per workload entry (None: no cap but
    the grid's); and the measurements of each shape taken (`--passes`; None: one, and a second where
    its spread or the answer's sensitivity to it asks)."""

    sizing: SizingTerms
    max_points: int | None = None
    passes: int | None = DEFAULT_PASSES  # None: once, and more where asked (`_another_pass`)

    @property
    def per_shape(self) -> int:
        """The measurements a shape gets when taken: `passes`, else one (a second comes by a rule)."""
        return 1 if self.passes is None else self.passes

    @property
    def tolerance(self) -> float:
        return self.sizing.tolerance

    @property
    def confidence(self) -> float:
        return self.sizing.confidence

    @property
    def disk_classes(self) -> Mapping[str, DiskClass]:
        return self.sizing.disk_classes


@dataclass(frozen=True)
class Answer:
    """What a set of measurements answers: the pick (instance and disk class; None where no option
    meets the tolerance), the model's vCPU knee and its range at the confidence level, whether the
    pick is the same at both ends of the ranges, and whether the model is trusted."""

    instance: str | None
    disk_class: str | None
    knee: int | None
    knee_low: int | None
    knee_high: int | None
    stable: bool = True
    trusted: bool = True

    @property
    def pick(self) -> tuple[str | None, str | None]:
        return self.instance, self.disk_class

    def knee_within(self, low: int | None, high: int | None) -> bool:
        """Whether this knee lies in a range (`high` None: unbounded above; `low` None: a range that
        was not reached, which only a knee not reached matches)."""
        if low is None:
            return self.knee is None
        if self.knee is None:
            return high is None
        return low <= self.knee <= (math.inf if high is None else high)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Step:
    """The chooser's next move: the point to measure (None: stop, with the reason in `stopped`),
    why, and the answer of the measurements so far (None before a fit)."""

    point: PlannedPoint | None
    why: str
    answer: Answer | None
    stopped: str = ""

    @property
    def waiting(self) -> bool:
        """No point now, and no stop: the next choice waits for measurements in flight."""
        return self.point is None and not self.stopped


# ---------------------------------------------------------------------------- the answer
def disk_speed(name: str, table: Mapping[str, DiskClass]) -> float:
    cls = table.get(name)
    return math.inf if cls is None or cls.read_mbps is None else float(cls.read_mbps)


def answer_of(sizing: Sizing) -> Answer:
    """The answer a sizing gives (`sizer.sizing.size`, as the report sizes): the pick, and the knee
    with its range."""
    instance, disk = sizing.pick
    rec = sizing.recommendation
    return Answer(instance, disk, sizing.knee, sizing.knee_range.low, sizing.knee_range.high, stable=sizing.stable,
                  trusted=True if rec is None else rec.model_trusted)


@dataclass
class Fitted:
    """The measurements of an entry fitted: the fit, its sizing, its answer and the recommendation's
    options the ranges leave open."""

    fit: WorkloadFit
    sizing: Sizing
    answer: Answer
    undecided: list[Option] = field(default_factory=list)  # options the ranges leave open, preferred first
    other_pick: tuple[str | None, str | None] = (None, None)  # the pick under the other trust verdict

    @property
    def trust_decides(self) -> bool:
        """Whether the pick turns on whether the model is trusted."""
        return self.other_pick != self.answer.pick


# ---------------------------------------------------------------------------- options
def undecided(rec: Recommendation) -> list[Option]:
    """The options whose verdict is open, priced, at most as dear as the pick (all of them where
    nothing is picked): they meet the tolerance at the optimistic end of their range but not at the
    pessimistic one, or no measurement judges them (the model is not trusted) and the model's figure
    meets it."""
    return priced_by(rec, [o for o in rec.considered
                            if not o.meets and (o.meets_optimistic or model_alone_meets(rec, o))])


def model_alone_meets(rec: Recommendation, option: Option) -> bool:
    return option.basis == "not judged" and meets_tolerance(option.predicted, rec.ceiling, rec.tolerance)


def priced_by(rec: Recommendation, options: list[Option]) -> list[Option]:
    """Of `options`, the priced ones at most as dear as the pick (all where nothing is picked), cheapest first."""
    limit = math.inf if rec.chosen is None else whole_cents(rec.chosen.price_per_gpu_hour or 0.0)
    out = [o for o in options if o.price_per_gpu_hour is not None and whole_cents(o.price_per_gpu_hour) <= limit]
    return sorted(out, key=lambda o: (whole_cents(o.price_per_gpu_hour or 0.0), o.instance.gpu_count,
                                      o.instance.instance_type, o.disk_class))


def contains(option: Option, point: PlannedPoint, table: Mapping[str, DiskClass]) -> bool:
    """Whether an option (one GPU's share of a catalog row with a disk class) contains a grid
    shape: at least its vCPUs and RAM, and its disk class or a slower one per GPU, or any disk where
    its page cache holds the dataset (`evidence`)."""
    shape: InstanceShape = point.shape
    if shape.vcpus > option.share_vcpus + 1e-9 or shape.ram_gib > option.share_memory_gib + 1e-6:
        return False
    if option.dataset_cached or (shape.disk_class == option.disk_class and option.instance.gpu_count <= 1):
        return True
    mbps = option.disk_mbps
    return mbps is None or disk_speed(shape.disk_class, table) <= mbps
