"""Adaptive sweeps: measure where the answer can still change, and stop when it cannot.

A grid sweep measures every shape of workloads x vCPUs x RAM x disk classes. An adaptive sweep
measures, per workload entry, one shape at a time from the same grid, chosen from what is stored so
far (`AdaptiveChooser.step`). The knee is searched on the fastest disk class at the largest RAM
level (the one that holds the dataset where any does): the *knee's plane*. Other disk classes and
the smaller RAM levels are measured only at the shapes that decide the pick: those the open options
rest on, and the knee's vCPU level.

Each shape taken is measured once (`--passes N`: N times, back to back), and again only where its
first window spread past NOISY_SPREAD, or where the pick turns on it: an option at most as dear as
the pick rests on it, and that option's verdict is open at the confidence level, or the shape sets
a ceiling no point measured, or its lowest measurement read SENSITIVE_SHIFT lower (its highest that
much higher) gives another pick; up to MOST_PASSES measurements. Never a shape held flat by a throttle (bound by
the disk cap of a throttled class: its passes agree by construction). A shape is taken only where
its measurements fit the budget.

1. the start: the GPU ceiling (once, where the entry has one and it bounds the entry), then the
   largest and the smallest vCPU count on the knee's plane;
2. then, fitted on what is measured, the first that applies:
   - the vCPU levels inside the knee's range (and the level on either side of it) on the knee's
     plane, nearest the knee first;
   - another pass of a shape that asks for one (above);
   - a shape that tells a catalog option whose verdict the ranges leave open (it meets the
     tolerance at the optimistic end of its range, not at the pessimistic one; or no measurement
     judges it, the model is not trusted, and the model's figure meets): the largest grid shape the
     option contains, where it is not measured yet (the floor the decision would use); where it
     contains none (the model alone judges it), a shape bound as the option is;
   - where the pick turns on whether the model is trusted (`sizer.model.tolerance.model_trusted`):
     where its held-out error failed it, the shape it predicts worst held out, measured once more
     (as `--refine` does); while it was held out at fewer shapes than trust needs, or while the fit
     has fewer than MIN_SPARE_SHAPES real shapes beyond its free parameters, an unmeasured shape at
     a vCPU count not measured yet, farthest from the measured shapes, on the knee's plane first,
     then at the knee's level;
   - of the knee's plane and the knee's level, the shape whose range (what a measurement there
     would read, `sizer.model.uncertainty.model_range`) straddles the tolerance line widest, else
     the widest.

It stops when the answer is settled: the start is measured, none of the conditions above asks for
a shape, no open option's shape is left to measure, the pick is the same at both ends of the ranges
(`Recommendation.optimistic` is None), and the last shape measured changed neither the pick
(instance and disk class) nor moved the knee out of the range it had before. It stops too where the
next shape's measurements do not fit `max_points`, or when every shape that decides the pick is
measured and no rule asks for one again.

The choice is a function of the stored measurements in the order they were taken: a resumed sweep
makes the same choices. A parallel sweep (`step`'s `in_flight`) runs beside each other only what
no measurement can change (the start's shapes, the passes `--passes` owes a shape taken); a choice
fitted on measurements waits until none of the entry's is in flight, and the start's measurements
are read in start order whatever order they ended in, so its choices are a serial sweep's over the
same stored points. Nothing is measured here.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from typing import Any, Mapping, Sequence

from sizer.model.decision import fit_trusted
from sizer.model.evaluate import fit_group
from sizer.model.tolerance import enough_held_out
from sizer.model.uncertainty import model_range
from sizer.points import Point, combine_passes
from sizer.recommend import Option
from sizer.shapes import PlannedPoint, shape_key
from sizer.sizing import size
from sizer.sweep.adaptive_terms import (
    STOP_EXHAUSTED,
    STOP_MAX_POINTS,
    STOP_REASONS,
    STOP_STABLE,
    STOP_TIME,
    AdaptiveTerms,
    Answer,
    Fitted,
    Step,
    answer_of,
    contains,
    disk_speed,
    priced_by,
    undecided,
)
from sizer.variants import SYNTHETIC_INPUT
from workloads.stats import NOISY_SPREAD

MIN_SPARE_SHAPES = 2  # real shapes beyond the fit's free parameters before the answer can settle
# One more pass of a shape can read this much lower or higher: the median difference between two
# passes of one shape on shared GPU hosts was 5 to 22% (docs/PERFORMANCE.md, "Adaptive sweeps").
SENSITIVE_SHIFT = 0.10
MOST_PASSES = 3  # the most measurements of a shape the rules of another pass take
SETS_CEILING = 0.01  # a shape within this share of a ceiling no point measured sets it

__all__ = ["STOP_EXHAUSTED", "STOP_MAX_POINTS", "STOP_REASONS", "STOP_STABLE", "STOP_TIME", "AdaptiveChooser",
           "AdaptiveTerms", "Answer", "Step", "answer_of", "shape_counts"]


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
        self._memo: dict[tuple, Fitted | None] = {}

    # ------------------------------------------------------------------ the grid
    def _by_shape(self, vcpus: int, ram_gib: float, disk: str) -> PlannedPoint | None:
        return next((p for p in self.real if (p.shape.vcpus, p.shape.ram_gib, p.shape.disk_class) == (vcpus, ram_gib, disk)),
                    None)

    def _axes(self) -> tuple[list[int], list[float], list[str]]:
        vcpus = sorted({p.shape.vcpus for p in self.real})
        rams = sorted({p.shape.ram_gib for p in self.real})
        disks = sorted({p.shape.disk_class for p in self.real}, key=lambda d: disk_speed(d, self.terms.disk_classes))
        return vcpus, rams, disks

    def start(self) -> list[PlannedPoint]:
        """The shapes measured first (see the module): the GPU ceiling, then the largest and the
        smallest vCPU count on the knee's plane."""
        vcpus, _, _ = self._axes()
        out = [self.ceiling] if self.ceiling is not None else []
        for v in (vcpus[-1], vcpus[0]):
            point = self._on_knee_plane(v)
            if point is not None and point not in out:
                out.append(point)
        return out

    def _on_knee_plane(self, vcpus: int) -> PlannedPoint | None:
        """The grid shape of `vcpus` where the knee is searched: on the fastest disk class, at the
        largest RAM level (the one that holds the dataset where any does)."""
        _, rams, disks = self._axes()
        return self._by_shape(vcpus, rams[-1], disks[-1])

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
        passes = f"{self.terms.per_shape} passes" if self.terms.per_shape > 1 else "measurement"
        return Step(None, f"{len(measured)} points measured; the next shape's {passes} would pass "
                          f"the most allowed, {self.terms.max_points}", self._answer(measured), STOP_MAX_POINTS)

    def _cost(self, point: PlannedPoint, taken: Mapping[str, int]) -> int:
        """The measurements a point commits to: a new shape's passes (the ceiling: one), else one."""
        return self.terms.per_shape if not point.ceiling and taken.get(shape_key(point.key), 0) == 0 else 1

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
            first = 1 if self.ceiling is not None and base == self.ceiling.key else self.terms.per_shape
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
            if point is not None and 0 < taken.get(key, 0) < self.terms.per_shape:
                return Step(_next_pass(point, used), f"pass {taken[key] + 1} of {self.terms.per_shape}", None)
        for point in self.start():
            count = taken.get(point.key, 0)
            if count == 0:
                return Step(point, "start: " + _start_words(point), None)
            if not point.ceiling and count < self.terms.per_shape:  # its first pass is in flight
                return Step(_next_pass(point, used), f"pass {count + 1} of {self.terms.per_shape}", None)
        return None

    def answer(self, measured: Sequence[tuple[str, Point]]) -> Answer | None:
        """The answer of the entry's stored (key, point) pairs, as the report sizes them (None before a fit)."""
        return self._answer(measured)

    def _answer(self, measured: Sequence[tuple[str, Point]]) -> Answer | None:
        fitted = self._fitted(measured)
        return None if fitted is None else fitted.answer

    def _fitted(self, measured: Sequence[tuple[str, Point]]) -> Fitted | None:
        key = tuple(sorted((k, p.status, p.throughput) for k, p in measured))
        if key not in self._memo:
            self._memo[key] = self._fit(measured)
        return self._memo[key]

    def _fit(self, measured: Sequence[tuple[str, Point]]) -> Fitted | None:
        points = [p for _, p in sorted(measured, key=lambda kp: kp[0])]
        if not any(p.usable and p.input != SYNTHETIC_INPUT for p in points):
            return None
        fit = fit_group(self.workload, points, dict(self.terms.disk_classes))
        if fit is None:
            return None
        # The report sizes each shape at the median of its passes: the same points, the same answer.
        sizing = size(combine_passes(points), fit, self.terms.sizing)
        open_options = [] if sizing.recommendation is None else undecided(sizing.recommendation)
        return Fitted(fit, sizing, answer_of(sizing), open_options,
                      sizing.pick_if(trusted=not fit_trusted(fit, self.terms.tolerance)))

    def _settled(self, measured: Sequence[tuple[str, Point]], fitted: Fitted, counts: dict[str, int]) -> str:
        """Why the answer is settled (see the module), or "" where it is not."""
        answer = fitted.answer
        if (not answer.stable or self._knee_levels(fitted, counts) or self._short_of_evidence(fitted)
                or self._trust_pending(fitted) or self._worst_held_out(fitted, counts) is not None
                or self._another_pass(fitted, measured, counts, set()) is not None
                or any(self._telling(option, counts) is not None for option in fitted.undecided)):
            return ""
        before = self._answer(_before_last_shape(measured))
        if before is None or before.pick != answer.pick or not answer.knee_within(before.knee_low, before.knee_high):
            return ""
        pick = "no option meets the tolerance" if answer.instance is None else f"{answer.instance} with {answer.disk_class}"
        return (f"the answer holds at both ends of the ranges and did not move with the last shape: {pick}, "
                f"knee {_knee_words(answer)}")

    @staticmethod
    def _short_of_evidence(fitted: Fitted) -> bool:
        """Too few real shapes for held-out errors and ranges to mean anything: at least
        MIN_SPARE_SHAPES more than the fit's free parameters."""
        fit = fitted.fit
        free = sum(1 for p in fit.params.values() if p.source == "fit")
        return fit.loo_max_ape is None or len(fit.residuals) < free + MIN_SPARE_SHAPES

    @staticmethod
    def _trust_pending(fitted: Fitted) -> bool:
        """Whether the pick turns on a trust verdict more shapes can still change: the pick would
        differ were the model trusted, and it was held out at fewer shapes than trust needs."""
        return fitted.trust_decides and not enough_held_out(len(fitted.fit.loo))

    def _worst_held_out(self, fitted: Fitted, counts: dict[str, int],
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
        if point is None or counts.get(point.key, 0) > max(self.terms.per_shape, 2):
            return None
        return _next_pass(point, used or set())

    def _another_pass(self, fitted: Fitted, measured: Sequence[tuple[str, Point]], counts: dict[str, int],
                      used: set[str]) -> tuple[PlannedPoint, str] | None:
        """Where passes are not fixed: one more pass of the first shape, in the order measured, that
        asks for it (that pass, and why): measured once, its windows spread past NOISY_SPREAD; or,
        measured fewer than MOST_PASSES times, an option at most as dear as the pick rests on it and
        the pick turns on it (the option's verdict is open at the confidence level, or `_turns_on`).
        Never a shape held flat by a throttle (bound by the disk cap of a throttled class, its
        passes agree by construction), nor one with a failed measurement."""
        if self.terms.passes is not None or fitted.fit.ceiling <= 0:
            return None
        by_shape: dict[str, list[Point]] = {}
        for key, point in measured:
            by_shape.setdefault(shape_key(key), []).append(point)
        open_on = self._resting_on(fitted)
        line = 1 - self.terms.tolerance
        for key, points in by_shape.items():
            planned = self._real_by_key.get(key)
            if (planned is None or len(points) >= MOST_PASSES or not all(p.usable for p in points)
                    or any(self._throttle_held(p) for p in points)):
                continue
            if len(points) == 1 and points[0].spread > NOISY_SPREAD:
                return _next_pass(planned, used), f"its windows spread by {points[0].spread:.0%}: another pass"
            label = planned.shape.label()
            if label not in open_on:
                continue
            share = statistics.median(p.throughput for p in points) / fitted.fit.ceiling
            # Where no point measured the ceiling, the fit sets it at the top shapes: a figure there
            # moves the ceiling with it (its share stays near 100% whatever it reads), and its own
            # passes are all its range has.
            sets_ceiling = not fitted.sizing.draws.ceiling_measured and share >= 1 - SETS_CEILING
            reason = open_on[label] or ("its figure sets the ceiling, which no point measured" if sets_ceiling else "")
            why = (f"the pick turns on it ({share:.0%} of the ceiling, the line at {line:.0%}"
                   f"{'; ' + reason if reason else ''}): pass {len(points) + 1}")
            if reason or self._turns_on(fitted, measured, key):
                return _next_pass(planned, used), why
        return None

    @staticmethod
    def _resting_on(fitted: Fitted) -> dict[str, str]:
        """The measured shapes the verdicts of options at most as dear as the pick rest on (all
        priced options where nothing is picked), by label: "" where each such verdict is settled,
        else the first open one in words (it meets the tolerance at the optimistic end only)."""
        rec = fitted.sizing.recommendation
        if rec is None:
            return {}
        out: dict[str, str] = {}
        for option in priced_by(rec, [o for o in rec.considered if o.measured_shape]):
            open_verdict = option.meets_optimistic and not option.meets
            words = f"{option.instance.instance_type} with {option.disk_class} meets at the optimistic end only"
            if not out.get(option.measured_shape):
                out[option.measured_shape] = words if open_verdict else ""
        return out

    def _turns_on(self, fitted: Fitted, measured: Sequence[tuple[str, Point]], key: str) -> bool:
        """Whether the pick turns on shape `key`: its lowest measurement read SENSITIVE_SHIFT lower,
        or its highest that much higher, gives another pick (one more pass of a shared host can
        read that far: a tenth, the median difference between two passes of one shape there)."""
        mine = [i for i, (k, _) in enumerate(measured) if shape_key(k) == key]
        for scale, pick in ((1 - SENSITIVE_SHIFT, min), (1 + SENSITIVE_SHIFT, max)):
            i = pick(mine, key=lambda j: measured[j][1].throughput)
            moved = list(measured)
            moved[i] = (moved[i][0], dataclasses.replace(moved[i][1], throughput=moved[i][1].throughput * scale))
            other = self._fitted(moved)
            if other is None or other.answer.pick != fitted.answer.pick:
                return True
        return False

    def _throttle_held(self, point: Point) -> bool:
        """Bound by the cap of a throttled disk class: the rate is the throttle's, whatever the host."""
        cls = self.terms.disk_classes.get(point.disk_class)
        return point.bottleneck == "disk" and cls is not None and cls.throttled

    # ------------------------------------------------------------------ choosing
    def _choose(self, fitted: Fitted, measured: Sequence[tuple[str, Point]], counts: dict[str, int],
                used: set[str]) -> Step:
        levels = self._knee_levels(fitted, counts)
        if levels:
            return Step(levels[0], f"inside the knee's range ({_knee_words(fitted.answer)})", fitted.answer)
        again = self._another_pass(fitted, measured, counts, used)
        if again is not None:
            return Step(again[0], again[1], fitted.answer)
        for option in fitted.undecided:
            point = self._telling(option, counts)
            if point is not None:
                verdict = ("no measured shape judges it yet" if option.basis == "not judged"
                           else "it meets the tolerance only at the optimistic end of its range")
                return Step(point, f"{option.instance.instance_type} with {option.disk_class}: {verdict}", fitted.answer)
        point = self._worst_held_out(fitted, counts, used)
        if point is not None:
            return Step(point, "the shape the model predicts worst held out, measured again", fitted.answer)
        if self._short_of_evidence(fitted) or self._trust_pending(fitted):
            point = self._least_supported(counts, fitted.answer.knee)
            if point is not None:
                return Step(point, "tests the model where no measured shape is near", fitted.answer)
        point = self._most_uncertain(fitted, measured, counts)
        if point is not None:
            return Step(point, "the widest range of what a measurement would read", fitted.answer)
        return Step(None, "every shape that decides the pick (the knee's plane, the knee's vCPUs on each disk class "
                          "and RAM level, the shapes options rest on) is measured, and none asked for again",
                    fitted.answer, STOP_EXHAUSTED)

    def _deciding(self, knee: int | None) -> tuple[list[PlannedPoint], list[PlannedPoint]]:
        """The shapes besides the options' own (`_telling`) that decide the pick: every vCPU level on
        the knee's plane, and the knee's level (the grid level at or above the knee; the largest
        where it is not reached) on the other disk classes and RAM levels."""
        vcpus, _, _ = self._axes()
        plane = [p for v in vcpus if (p := self._on_knee_plane(v)) is not None]
        level = next((v for v in vcpus if knee is not None and v >= knee), vcpus[-1])
        return plane, [p for p in self.real if p.shape.vcpus == level and p not in plane]

    def _least_supported(self, counts: dict[str, int], knee: int | None) -> PlannedPoint | None:
        """The unmeasured shape where a held-out check tests the model most, of those that decide the
        pick (`_deciding`: the knee's plane first): at a vCPU count no shape was measured at (the
        model interpolates there), farthest from every measured shape, each axis as its grid levels
        spread over 0 to 1."""
        vcpus, rams, disks = self._axes()

        def position(p: PlannedPoint) -> tuple[float, float, float]:
            return (_spread(vcpus.index(p.shape.vcpus), len(vcpus)), _spread(rams.index(p.shape.ram_gib), len(rams)),
                    _spread(disks.index(p.shape.disk_class), len(disks)))

        measured = [p for p in self.real if counts.get(p.key, 0)]
        if not measured:
            return None
        levels = {p.shape.vcpus for p in measured}
        plane, at_knee = self._deciding(knee)
        best: tuple[tuple[bool, float], PlannedPoint] | None = None
        for point in [p for p in plane if not counts.get(p.key, 0)] or at_knee:  # the knee's plane first
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

    def _knee_levels(self, fitted: Fitted, counts: dict[str, int]) -> list[PlannedPoint]:
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
        inside = [p for p in self.real if contains(option, p, table)]
        if not inside:
            vcpus, rams, disks = self._axes()
            if option.bottleneck in ("cpu", "gpu"):
                inside = [p for p in self.real if p.shape.disk_class == disks[-1]]
            else:
                own = option.disk_mbps if option.disk_mbps is not None else math.inf
                disk = min(disks, key=lambda d: (abs(math.log(disk_speed(d, table) / own))
                                                  if math.isfinite(own) and math.isfinite(disk_speed(d, table))
                                                  else (0.0 if disk_speed(d, table) == own else math.inf)))
                inside = [p for p in self.real if p.shape.disk_class == disk and p.shape.ram_gib == rams[-1]]
        if not inside:
            return None
        largest = max(inside, key=lambda p: (p.shape.vcpus, p.shape.ram_gib, disk_speed(p.shape.disk_class, table)))
        return None if counts.get(largest.key, 0) else largest

    def _most_uncertain(self, fitted: Fitted, measured: Sequence[tuple[str, Point]],
                        counts: dict[str, int]) -> PlannedPoint | None:
        """Of the unmeasured shapes that decide the pick (`_deciding`), the one whose range straddles the
        tolerance line widest, else the widest range."""
        fit = fitted.fit
        template = next((p for _, p in measured if p.usable and p.input != SYNTHETIC_INPUT), None)
        if template is None or fit.ceiling <= 0:
            return None
        draws = fitted.sizing.draws
        line = (1 - self.terms.tolerance) * fit.ceiling
        best: tuple[tuple[float, ...], PlannedPoint] | None = None
        plane, at_knee = self._deciding(fitted.answer.knee)
        for point in plane + at_knee:
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


def _spread(index: int, count: int) -> float:
    return index / (count - 1) if count > 1 else 0.0


def _start_words(point: PlannedPoint) -> str:
    return "the GPU ceiling" if point.ceiling else point.shape.label()


def _knee_words(answer: Answer) -> str:
    if answer.knee_low is None:
        return "not reached"
    high = "more" if answer.knee_high is None else str(answer.knee_high)
    return f"{answer.knee} vCPUs, {answer.knee_low} to {high}"
