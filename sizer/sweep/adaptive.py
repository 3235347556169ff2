"""Adaptive sweeps: measure where the answer can still change, and stop when it cannot.

A grid sweep measures every shape of workloads x vCPUs x RAM x disk classes. An adaptive sweep
measures, per workload entry, one shape at a time from the same grid, chosen from what is stored so
far (`AdaptiveChooser.step`). Each shape it takes is measured `passes` times (default 2) back to
back, as a grid's passes measure it, and judged on their median: one measurement of a shared host
can come at any of its speeds. A shape is taken only where all its passes fit the budget, so a
larger budget or a resumed sweep takes the same shapes in the same order.

1. the start: the GPU ceiling (once, where the entry has one and it bounds the entry), then the
   largest and the smallest vCPU count at the largest RAM on the fastest disk, and the two largest
   vCPU counts at the smallest RAM on the slowest disk (two levels: a fit that holds out one level,
   as the model's own error at unmeasured counts does, still sees the slow disk);
2. then, fitted on what is measured, the first that applies:
   - the vCPU levels inside the knee's range (and the level on either side of it) at the largest
     RAM on the fastest disk, nearest the knee first;
   - a shape that tells a catalog option whose verdict the ranges leave open (it meets the
     tolerance at the optimistic end of its range, not at the pessimistic one; or no measurement
     judges it, the model is not trusted, and the model's figure meets): the largest grid shape the
     option contains, where it is not measured yet (the floor the decision would use); where it
     contains none (the model alone judges it), a shape bound as the option is;
   - where the pick turns on whether the model is trusted (`sizer.model.tolerance.model_trusted`):
     while it was held out at fewer shapes than trust needs, or while the fit has fewer than
     MIN_SPARE_SHAPES real shapes beyond its free parameters, a shape at a vCPU count not measured
     yet, farthest from the measured shapes; where its held-out error failed it, the shape it
     predicts worst held out, measured once more than the passes (as `--refine` does);
   - the shape whose range (what a measurement there would read,
     `sizer.model.uncertainty.model_range`) straddles the tolerance line widest, else the widest.

It stops when the answer is settled: the start is measured, none of the conditions above asks for
a shape, the pick is the same at both ends of the ranges (`Recommendation.optimistic` is None),
and the last shape measured changed neither the pick (instance and disk class) nor moved the knee
out of the range it had before. It stops too where the next shape's passes do not fit `max_points`
measurements of the entry, or when every shape has been measured and no rule asks for one again.

The choice is a function of the stored measurements in the order they were taken: a resumed sweep
makes the same choices. Nothing is measured here.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from sizer.catalog import whole_cents
from sizer.diskclasses import DiskClass
from sizer.model import WorkloadFit, meets_tolerance
from sizer.model.decision import fit_trusted
from sizer.model.evaluate import fit_group
from sizer.model.tolerance import enough_held_out
from sizer.model.uncertainty import model_range
from sizer.points import Point, combine_passes
from sizer.recommend import Option, Recommendation
from sizer.shapes import InstanceShape, PlannedPoint, shape_key
from sizer.sizing import Sizing, SizingTerms, size
from sizer.sweep.strategy import DEFAULT_PASSES
from sizer.variants import SYNTHETIC_INPUT

MIN_SPARE_SHAPES = 2  # real shapes beyond the fit's free parameters before the answer can settle

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
    the grid's); and the measurements of each shape taken."""

    sizing: SizingTerms
    max_points: int | None = None
    passes: int = DEFAULT_PASSES

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
def _disk_speed(name: str, table: Mapping[str, DiskClass]) -> float:
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
class _Fitted:
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


# ---------------------------------------------------------------------------- the chooser
class AdaptiveChooser:
    """Chooses the next shape of one workload entry (see the module). `candidates` are the entry's
    grid as a one-pass plan (pass 1 of each shape, and its GPU ceiling point where it has one)."""

    def __init__(self, candidates: Sequence[PlannedPoint], terms: AdaptiveTerms):
        self.terms = terms
        self.candidates = sorted((p for p in candidates if p.pass_no == 1), key=lambda p: p.key)
        if not self.candidates:
            raise ValueError("an adaptive sweep needs at least one candidate shape")
        self.workload = self.candidates[0].workload
        self.real = [p for p in self.candidates if not p.ceiling]
        self.ceiling = next((p for p in self.candidates if p.ceiling and _ceiling_bounds(self.real)), None)
        self._real_by_key = {p.key: p for p in self.real}
        self._memo: dict[tuple, _Fitted | None] = {}

    # ------------------------------------------------------------------ the grid
    def _by_shape(self, vcpus: int, ram_gib: float, disk: str) -> PlannedPoint | None:
        return next((p for p in self.real if (p.shape.vcpus, p.shape.ram_gib, p.shape.disk_class) == (vcpus, ram_gib, disk)),
                    None)

    def _axes(self) -> tuple[list[int], list[float], list[str]]:
        vcpus = sorted({p.shape.vcpus for p in self.real})
        rams = sorted({p.shape.ram_gib for p in self.real})
        disks = sorted({p.shape.disk_class for p in self.real}, key=lambda d: _disk_speed(d, self.terms.disk_classes))
        return vcpus, rams, disks

    def start(self) -> list[PlannedPoint]:
        """The shapes measured first (see the module), each once."""
        vcpus, rams, disks = self._axes()
        wanted = [(vcpus[-1], rams[-1], disks[-1]), (vcpus[0], rams[-1], disks[-1]), (vcpus[-1], rams[0], disks[0]),
                  (vcpus[-2 if len(vcpus) > 1 else -1], rams[0], disks[0])]
        out = [self.ceiling] if self.ceiling is not None else []
        for shape in wanted:
            point = self._by_shape(*shape)
            if point is not None and point not in out:
                out.append(point)
        return out

    # ------------------------------------------------------------------ one step
    def step(self, measured: Sequence[tuple[str, Point]], in_flight: Sequence[str] = ()) -> Step:
        """The next point to measure given the entry's stored (key, point) pairs in the order they
        were stored and the keys of its points being measured now (`in_flight`, a parallel sweep's),
        or the reason to stop, or to wait (`Step.waiting`): a point whose choice depends on the
        measurements in flight waits for them. A point decided already (a start shape, a pass owed
        to a shape taken) may run beside them."""
        measured = self.canonical(measured)
        counts = shape_counts(measured)
        taken = Counter(counts) + Counter(shape_key(k) for k in in_flight)
        used = {k for k, _ in measured} | set(in_flight)
        cap = self.terms.max_points
        spent = len(measured) + len(in_flight)
        if cap is not None and spent >= cap:
            return self._wait(in_flight) or self._stop_at_cap(measured)
        step = self._decided(measured, taken, used)
        if step is None and in_flight:
            return self._wait(in_flight) or self._stop_at_cap(measured)
        if step is None:
            fitted = self._fitted(measured)
            if fitted is None:
                step = self._first_unmeasured(counts, None, "no usable measurement yet")
            else:
                settled = self._settled(measured, fitted, counts)
                if settled:
                    return Step(None, settled, fitted.answer, STOP_STABLE)
                step = self._choose(fitted, measured, counts, used)
        if step.point is not None and cap is not None and spent + self._cost(step.point, taken) > cap:
            return self._wait(in_flight) or self._stop_at_cap(measured)
        return step

    @staticmethod
    def _wait(in_flight: Sequence[str]) -> Step | None:
        if not in_flight:
            return None
        return Step(None, f"the next choice waits for {len(in_flight)} measurement(s) in flight", None)

    def _stop_at_cap(self, measured: Sequence[tuple[str, Point]]) -> Step:
        return Step(None, f"{len(measured)} points measured; the next shape's {self.terms.passes} passes would pass "
                          f"the most allowed, {self.terms.max_points}", self._answer(measured), STOP_MAX_POINTS)

    def _cost(self, point: PlannedPoint, taken: Mapping[str, int]) -> int:
        """The measurements a point commits to: a new shape's passes (the ceiling: one), else one."""
        return self.terms.passes if not point.ceiling and taken.get(point.key, 0) == 0 else 1

    def canonical(self, measured: Sequence[tuple[str, Point]]) -> list[tuple[str, Point]]:
        """The stored measurements in the order a serial sweep takes them: the start's (the first
        passes of each start shape, in start order: a parallel sweep measures them side by side and
        stores them as they end), then the rest as stored (each later choice waits for the one
        before it, so their order is the choices')."""
        order = {p.key: i for i, p in enumerate(self.start())}
        seen: Counter[str] = Counter()
        start, rest = [], []
        for key, point in measured:
            base = shape_key(key)
            seen[base] += 1
            first = 1 if self.ceiling is not None and base == self.ceiling.key else self.terms.passes
            if base in order and seen[base] <= first:
                start.append((order[base], key, point))
            else:
                rest.append((key, point))
        return [(k, p) for _, k, p in sorted(start, key=lambda t: (t[0], t[1]))] + rest

    def _decided(self, measured: Sequence[tuple[str, Point]], taken: Mapping[str, int], used: set[str]) -> Step | None:
        """A point no measurement can change: a pass owed to a shape taken (the first such shape in
        the order measured), else the next start shape not taken yet."""
        for key in dict.fromkeys(shape_key(k) for k, _ in measured):
            point = self._real_by_key.get(key)
            if point is not None and 0 < taken.get(key, 0) < self.terms.passes:
                return Step(_next_pass(point, used), f"pass {taken[key] + 1} of {self.terms.passes}", None)
        for point in self.start():
            count = taken.get(point.key, 0)
            if count == 0:
                return Step(point, "start: " + _start_words(point), None)
            if not point.ceiling and count < self.terms.passes:  # its first pass is in flight
                return Step(_next_pass(point, used), f"pass {count + 1} of {self.terms.passes}", None)
        return None

    def answer(self, measured: Sequence[tuple[str, Point]]) -> Answer | None:
        """The answer of the entry's stored (key, point) pairs, as the report sizes them (None before a fit)."""
        return self._answer(measured)

    def _answer(self, measured: Sequence[tuple[str, Point]]) -> Answer | None:
        fitted = self._fitted(measured)
        return None if fitted is None else fitted.answer

    def _fitted(self, measured: Sequence[tuple[str, Point]]) -> _Fitted | None:
        key = tuple(sorted((k, p.status, p.throughput) for k, p in measured))
        if key not in self._memo:
            self._memo[key] = self._fit(measured)
        return self._memo[key]

    def _fit(self, measured: Sequence[tuple[str, Point]]) -> _Fitted | None:
        points = [p for _, p in sorted(measured, key=lambda kp: kp[0])]
        if not any(p.usable and p.input != SYNTHETIC_INPUT for p in points):
            return None
        fit = fit_group(self.workload, points, dict(self.terms.disk_classes))
        if fit is None:
            return None
        # The report sizes each shape at the median of its passes: the same points, the same answer.
        sizing = size(combine_passes(points), fit, self.terms.sizing)
        undecided = [] if sizing.recommendation is None else _undecided(sizing.recommendation)
        return _Fitted(fit, sizing, answer_of(sizing), undecided,
                       sizing.pick_if(trusted=not fit_trusted(fit, self.terms.tolerance)))

    def _settled(self, measured: Sequence[tuple[str, Point]], fitted: _Fitted, counts: dict[str, int]) -> str:
        """Why the answer is settled (see the module), or "" where it is not."""
        answer = fitted.answer
        if (not answer.stable or self._knee_levels(fitted, counts) or self._short_of_evidence(fitted)
                or self._trust_pending(fitted) or self._worst_held_out(fitted, counts) is not None):
            return ""
        before = self._answer(_before_last_shape(measured))
        if before is None or before.pick != answer.pick or not answer.knee_within(before.knee_low, before.knee_high):
            return ""
        pick = "no option meets the tolerance" if answer.instance is None else f"{answer.instance} with {answer.disk_class}"
        return (f"the answer holds at both ends of the ranges and did not move with the last shape: {pick}, "
                f"knee {_knee_words(answer)}")

    @staticmethod
    def _short_of_evidence(fitted: _Fitted) -> bool:
        """Too few real shapes for held-out errors and ranges to mean anything: at least
        MIN_SPARE_SHAPES more than the fit's free parameters."""
        fit = fitted.fit
        free = sum(1 for p in fit.params.values() if p.source == "fit")
        return fit.loo_max_ape is None or len(fit.residuals) < free + MIN_SPARE_SHAPES

    @staticmethod
    def _trust_pending(fitted: _Fitted) -> bool:
        """Whether the pick turns on a trust verdict more shapes can still change: the pick would
        differ were the model trusted, and it was held out at fewer shapes than trust needs."""
        return fitted.trust_decides and not enough_held_out(len(fitted.fit.loo))

    def _worst_held_out(self, fitted: _Fitted, counts: dict[str, int],
                        used: set[str] | None = None) -> PlannedPoint | None:
        """Where the pick turns on a model its held-out error failed: the shape it predicts worst
        held out, measured once more than the passes (as `--refine` does: a shape measured at a slow
        or fast moment of a shared host moves to its median); None otherwise."""
        fit = fitted.fit
        if fitted.answer.trusted or not fitted.trust_decides or not enough_held_out(len(fit.loo)):
            return None
        errors = [(abs(predicted - p.throughput) / p.throughput, p) for p, predicted in fit.loo
                  if p.throughput > 0 and p.input != SYNTHETIC_INPUT]
        if not errors:
            return None
        worst = max(errors, key=lambda ep: (ep[0], -ep[1].vcpus))[1]
        point = self._by_shape(worst.vcpus, worst.ram_gib, worst.disk_class)
        if point is None or counts.get(point.key, 0) > self.terms.passes:
            return None
        return _next_pass(point, used or set())

    # ------------------------------------------------------------------ choosing
    def _choose(self, fitted: _Fitted, measured: Sequence[tuple[str, Point]], counts: dict[str, int],
                used: set[str]) -> Step:
        levels = self._knee_levels(fitted, counts)
        if levels:
            return Step(levels[0], f"inside the knee's range ({_knee_words(fitted.answer)})", fitted.answer)
        for option in fitted.undecided:
            point = self._telling(option, counts)
            if point is not None:
                return Step(point, f"{option.instance.instance_type} with {option.disk_class} meets the tolerance only "
                                   "at the optimistic end of its range", fitted.answer)
        point = self._worst_held_out(fitted, counts, used)
        if point is not None:
            return Step(point, "the shape the model predicts worst held out, measured again", fitted.answer)
        if self._short_of_evidence(fitted) or self._trust_pending(fitted):
            point = self._least_supported(counts)
            if point is not None:
                return Step(point, "tests the model where no measured shape is near", fitted.answer)
        point = self._most_uncertain(fitted, measured, counts)
        if point is not None:
            return Step(point, "the widest range of what a measurement would read", fitted.answer)
        return self._first_unmeasured(counts, fitted.answer, "every shape measured")

    def _least_supported(self, counts: dict[str, int]) -> PlannedPoint | None:
        """The unmeasured shape where a held-out check tests the model most: at a vCPU count no
        shape was measured at (the model interpolates there), farthest from every measured shape,
        each axis as its grid levels spread over 0 to 1."""
        vcpus, rams, disks = self._axes()

        def position(p: PlannedPoint) -> tuple[float, float, float]:
            return (_spread(vcpus.index(p.shape.vcpus), len(vcpus)), _spread(rams.index(p.shape.ram_gib), len(rams)),
                    _spread(disks.index(p.shape.disk_class), len(disks)))

        measured = [p for p in self.real if counts.get(p.key, 0)]
        if not measured:
            return None
        levels = {p.shape.vcpus for p in measured}
        best: tuple[tuple[bool, float], PlannedPoint] | None = None
        for point in self.real:
            if counts.get(point.key, 0):
                continue
            distance = min(math.dist(position(point), position(there)) for there in measured)
            score = (point.shape.vcpus not in levels, distance)
            if best is None or score > best[0]:
                best = (score, point)
        return None if best is None else best[1]

    def _first_unmeasured(self, counts: dict[str, int], answer: Answer | None, why: str) -> Step:
        for point in self.real:
            if counts.get(point.key, 0) == 0:
                return Step(point, f"{why}: the next unmeasured shape", answer)
        return Step(None, "every shape of the grid measured, and none asked for again", answer, STOP_EXHAUSTED)

    def _knee_levels(self, fitted: _Fitted, counts: dict[str, int]) -> list[PlannedPoint]:
        """The unmeasured grid levels inside the knee's range and the level on either side of it, at
        the largest RAM on the fastest disk, nearest the knee first."""
        answer = fitted.answer
        vcpus, rams, disks = self._axes()
        if answer.knee_low is None:
            inside = [vcpus[-1]]
        else:
            high = math.inf if answer.knee_high is None else answer.knee_high
            inside = [v for v in vcpus if answer.knee_low <= v <= high]
            below = [v for v in vcpus if v < answer.knee_low]
            above = [v for v in vcpus if v > high]
            inside += below[-1:] + above[:1]
        knee = answer.knee if answer.knee is not None else vcpus[-1]
        out = []
        for v in sorted(set(inside), key=lambda v: (abs(v - knee), -v)):
            point = self._by_shape(v, rams[-1], disks[-1])
            if point is not None and counts.get(point.key, 0) == 0:
                out.append(point)
        return out

    def _telling(self, option: Option, counts: dict[str, int]) -> PlannedPoint | None:
        """The grid shape that tells an undecided option: the largest one it contains (the floor the
        decision would use), where it is not measured yet; where it contains none (the model alone
        judges it), a shape bound as the option is, nearest it: the most vCPUs on the fastest disk
        for a CPU- or GPU-bound option, else the most vCPUs at the largest RAM on the disk class
        nearest its own."""
        table = self.terms.disk_classes
        inside = [p for p in self.real if _contains(option, p, table)]
        if not inside:
            vcpus, rams, disks = self._axes()
            if option.bottleneck in ("cpu", "gpu"):
                inside = [p for p in self.real if p.shape.disk_class == disks[-1]]
            else:
                own = option.disk_mbps if option.disk_mbps is not None else math.inf
                disk = min(disks, key=lambda d: (abs(math.log(_disk_speed(d, table) / own))
                                                  if math.isfinite(own) and math.isfinite(_disk_speed(d, table))
                                                  else (0.0 if _disk_speed(d, table) == own else math.inf)))
                inside = [p for p in self.real if p.shape.disk_class == disk and p.shape.ram_gib == rams[-1]]
        if not inside:
            return None
        largest = max(inside, key=lambda p: (p.shape.vcpus, p.shape.ram_gib, _disk_speed(p.shape.disk_class, table)))
        return None if counts.get(largest.key, 0) else largest

    def _most_uncertain(self, fitted: _Fitted, measured: Sequence[tuple[str, Point]],
                        counts: dict[str, int]) -> PlannedPoint | None:
        """The unmeasured shape whose range straddles the tolerance line widest, else the widest range."""
        fit = fitted.fit
        template = next((p for _, p in measured if p.usable and p.input != SYNTHETIC_INPUT), None)
        if template is None or fit.ceiling <= 0:
            return None
        draws = fitted.sizing.draws
        line = (1 - self.terms.tolerance) * fit.ceiling
        best: tuple[tuple[float, ...], PlannedPoint] | None = None
        for point in self.real:
            if counts.get(point.key, 0):
                continue
            stub = dataclasses.replace(template, vcpus=point.shape.vcpus, ram_gib=point.shape.ram_gib,
                                       disk_class=point.shape.disk_class)
            low, high = model_range(draws, fit.predict_measured(stub), self.terms.confidence)
            straddle = min(high - line, line - low) / fit.ceiling
            score = (1.0 if straddle > 0 else 0.0, straddle if straddle > 0 else (high - low) / fit.ceiling)
            if best is None or score > best[0]:
                best = (score, point)
        return None if best is None else best[1]


# ---------------------------------------------------------------------------- helpers
def _ceiling_bounds(real: Sequence[PlannedPoint]) -> bool:
    """Whether a GPU ceiling point bounds the entry: not where the entry decodes on the GPU, whose
    decoding takes GPU time (`sizer.model.grouping.group_points` leaves the ceiling out of its fit)."""
    return not any(str(p.config.get("decode", "")) == "gpu" for p in real)


def shape_counts(measured: Sequence[tuple[str, Any]]) -> dict[str, int]:
    """Measurements per shape, by the key of the shape's first pass."""
    return dict(Counter(shape_key(key) for key, _ in measured))


def _before_last_shape(measured: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """The measurements before the last shape's run of passes began."""
    end = len(measured)
    while end > 0 and shape_key(measured[end - 1][0]) == shape_key(measured[-1][0]):
        end -= 1
    return measured[:end]


def _next_pass(point: PlannedPoint, used: set[str]) -> PlannedPoint:
    """The shape's next measurement: the first of its passes whose key is neither stored nor in
    flight (a pass cut short by a kill leaves its number free)."""
    pass_no = 1
    while dataclasses.replace(point, pass_no=pass_no).key in used:
        pass_no += 1
    return dataclasses.replace(point, pass_no=pass_no)


def _undecided(rec: Recommendation) -> list[Option]:
    """The options whose verdict is open, priced, at most as dear as the pick (all of them where
    nothing is picked): they meet the tolerance at the optimistic end of their range but not at the
    pessimistic one, or no measurement judges them (the model is not trusted) and the model's figure
    meets it."""
    return _priced_by(rec, [o for o in rec.considered
                            if not o.meets and (o.meets_optimistic or _model_alone_meets(rec, o))])


def _model_alone_meets(rec: Recommendation, option: Option) -> bool:
    return option.basis == "not judged" and meets_tolerance(option.predicted, rec.ceiling, rec.tolerance)


def _priced_by(rec: Recommendation, options: list[Option]) -> list[Option]:
    """Of `options`, the priced ones at most as dear as the pick (all where nothing is picked), cheapest first."""
    limit = math.inf if rec.chosen is None else whole_cents(rec.chosen.price_per_gpu_hour or 0.0)
    out = [o for o in options if o.price_per_gpu_hour is not None and whole_cents(o.price_per_gpu_hour) <= limit]
    return sorted(out, key=lambda o: (whole_cents(o.price_per_gpu_hour or 0.0), o.instance.gpu_count,
                                      o.instance.instance_type, o.disk_class))


def _contains(option: Option, point: PlannedPoint, table: Mapping[str, DiskClass]) -> bool:
    """Whether an option (one GPU's share of a catalog row with a disk class) contains a grid
    shape: at least its vCPUs and RAM, and its disk class or a slower one per GPU, or any disk where
    its page cache holds the dataset (`evidence`)."""
    shape: InstanceShape = point.shape
    if shape.vcpus > option.share_vcpus + 1e-9 or shape.ram_gib > option.share_memory_gib + 1e-6:
        return False
    if option.dataset_cached or (shape.disk_class == option.disk_class and option.instance.gpu_count <= 1):
        return True
    mbps = option.disk_mbps
    return mbps is None or _disk_speed(shape.disk_class, table) <= mbps


def _spread(index: int, count: int) -> float:
    return index / (count - 1) if count > 1 else 0.0


def _start_words(point: PlannedPoint) -> str:
    return "the GPU ceiling" if point.ceiling else point.shape.label()


def _knee_words(answer: Answer) -> str:
    if answer.knee_low is None:
        return "not reached"
    high = "more" if answer.knee_high is None else str(answer.knee_high)
    return f"{answer.knee} vCPUs, {answer.knee_low} to {high}"
