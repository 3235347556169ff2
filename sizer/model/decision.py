"""The figure a sizing decision uses for one instance shape, and its range.

Measurements outrank the model (`evidence`): where the shape contains a measured shape, the
decision uses the best measured median it contains; beyond the largest measured vCPU count, the
model's prediction but never less than that floor. A model that is not trusted (`model_trusted`)
is not used at all: a shape without measured evidence is then not judged. The share of the
ceiling comes with its range at the confidence level (`uncertainty`); a figure the model gives at a
vCPU count nobody measured also carries the model's own held-out error there (`level_error`), and
its pessimistic end never falls below the measured floor. That error moves the CPU and disk terms,
never the ceiling: a share of the ceiling holds it fixed, so a shape bound by the GPU is at 100% of it.

A ceiling that is only a lower bound (held at the best measurement: no measured shape was bound by
it) gives the model nothing to reach: the model's figure can show that a shape falls short of it,
never that it reaches it. Above a measured floor the floor's figure stands, and a shape only the
model judges meets the tolerance at the optimistic end at most.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sizer.model.evidence import DiskCaps, Evidence, MeasuredShape, disk_caps, evidence_for
from sizer.model.level_error import vcpu_band, widen
from sizer.model.tolerance import meets_tolerance, model_trusted, trust_words
from sizer.model.types import Prediction, WorkloadFit
from sizer.model.uncertainty import FitDraws, anchored_range, band_moves, fit_draws, model_draws, open_high

# Where a decision's figure comes from (`ShapeFigure.basis`).
BASES = ("measured", "measured floor", "model", "model above measured floor", "not judged")


@dataclass(frozen=True)
class ShapeFigure:
    """The decision's figure for one instance shape: the rate, where it comes from, the model's own
    prediction, the measured shape it rests on (if any) and its share of the ceiling with the
    pessimistic and optimistic ends at the confidence level; `dataset_cached`: the shape's page cache
    holds the dataset, so measured shapes on any disk were evidence for it (`evidence`)."""

    rate: float
    basis: str  # one of BASES
    model: float
    measured: MeasuredShape | None
    share: float
    share_pessimistic: float
    share_optimistic: float
    dataset_cached: bool = False

    @property
    def judged(self) -> bool:
        return self.basis != "not judged"

    def scaled(self, factor: float) -> ShapeFigure:
        """The figure times `factor` (one GPU's as an instance of several GPUs' loaded per-GPU figure)."""
        return replace(self, rate=self.rate * factor, share=self.share * factor,
                       share_pessimistic=min(self.share_pessimistic * factor, 1.0),
                       share_optimistic=min(self.share_optimistic * factor, 1.0))


def fit_trusted(fit: WorkloadFit, tolerance: float) -> bool:
    """Whether the fit's model is trusted (`model_trusted`: its held-out shapes and their largest error)."""
    return model_trusted(fit.loo_max_ape, tolerance, len(fit.loo))


def untrusted_words(fit: WorkloadFit, tolerance: float) -> str:
    """Why the fit's model is not trusted, in words."""
    return trust_words(fit.loo_max_ape, tolerance, len(fit.loo))


def shape_figure(fit: WorkloadFit, draws: FitDraws, predicted: Prediction, evidence: Evidence | None,
                 trusted: bool, confidence: float, band: float = 0.0) -> ShapeFigure:
    """The decision's figure for a shape the model predicts as `predicted`, with the measured
    `evidence` for it (None: none, or none that applies), at `confidence`; `band`: the model's own
    error at the shape's vCPU count (`level_error.vcpu_band`), which widens a figure the model gives."""
    model = predicted.throughput
    measured = None if evidence is None else draws.shapes[evidence.best]
    floor_end = None  # the measured floor's pessimistic end, under a figure the model gives
    if evidence is None:
        basis = "model" if trusted else "not judged"
        rate, samples = model, model_draws(draws, predicted)
    else:
        floor = np.max(draws.rates[:, list(evidence.contained)], axis=1)
        if evidence.beyond and trusted and model >= evidence.figure and not draws.gpu_open:
            basis, rate, samples = "model above measured floor", model, np.maximum(model_draws(draws, predicted), floor)
            floor_end = anchored_range(evidence.figure, floor, confidence)[0]
        else:
            basis, rate, samples = ("measured floor" if evidence.beyond else "measured"), evidence.figure, floor
    ceiling = fit.ceiling
    pessimistic, optimistic = anchored_range(rate, samples, confidence)
    if basis.startswith("model") and band > 0:
        moves = band_moves(draws, predicted, band, hold_ceiling=True)
        pessimistic, optimistic = widen(rate, pessimistic, optimistic, *moves)
    if floor_end is not None:  # a model figure above a measured floor never ends below the floor's own end
        pessimistic = max(pessimistic, min(floor_end, rate))
    unbounded = open_high(draws, predicted) if basis.startswith("model") else None
    if unbounded is not None:  # a term the points only bound caps nothing: the higher end can reach this
        if optimistic >= pessimistic:
            optimistic = max(optimistic, unbounded)
        else:
            pessimistic = max(pessimistic, unbounded)
    share = rate / ceiling if ceiling > 0 else 0.0
    return ShapeFigure(rate, basis, model, measured, share, _share(pessimistic, ceiling), _share(optimistic, ceiling))


def _share(rate: float, ceiling: float) -> float:
    """A rate's share of the ceiling, between 0 and 1: the ceiling is never below a measured median."""
    return min(max(rate / ceiling, 0.0), 1.0) if ceiling > 0 else 0.0


@dataclass
class Judge:
    """Judges the instance shapes of one recommendation: the fit, its draws, the caps of each
    measured disk class, whether the model is trusted, and the confidence level. `measurements`
    False (a target CPU model unlike the measured one): the measured figures do not apply."""

    fit: WorkloadFit
    table: dict[str, Any]
    draws: FitDraws
    caps: dict[str, DiskCaps | None]
    trusted: bool
    tolerance: float
    confidence: float
    measurements: bool = True

    @classmethod
    def of(cls, fit: WorkloadFit, table: dict[str, Any], tolerance: float, confidence: float,
           measurements: bool = True, trusted: bool | None = None) -> Judge:
        """`trusted` None: whether the fit's held-out error trusts the model."""
        draws = fit_draws(fit)
        caps = {s.disk_class: disk_caps(fit, table, s.disk_class) for s in draws.shapes}
        trusted = fit_trusted(fit, tolerance) if trusted is None else trusted
        return cls(fit, table, draws, caps, trusted, tolerance, confidence, measurements)

    def figure(self, predicted: Prediction, vcpus: float, ram_gib: float, disk_class: str, gpus: int) -> ShapeFigure:
        """The decision's figure for an instance shape (one GPU's share of `gpus`) the model predicts as `predicted`."""
        found, cached = None, False
        if self.measurements:
            disk = disk_caps(self.fit, self.table, disk_class, gpus)
            cached = self.fit.holds_dataset(ram_gib)
            found = evidence_for(self.draws.shapes, self.caps, vcpus, ram_gib, disk, disk_class, cached=cached)
        band = vcpu_band(self.fit, vcpus, self.confidence) if self.trusted else 0.0
        figure = shape_figure(self.fit, self.draws, predicted, found, self.trusted, self.confidence, band)
        return replace(figure, dataset_cached=cached) if cached else figure

    def short_of_lower_bound(self, basis: str) -> bool:
        """Whether a figure of this basis is the model's against a ceiling that is only a lower bound,
        which it can show a shape falls short of, never reaches (see the module)."""
        return basis == "model" and self.draws.gpu_open

    def meets(self, figure: ShapeFigure, optimistic: bool = False) -> bool:
        """Whether a judged figure is within tolerance of the ceiling at the pessimistic (or optimistic)
        end; the model's figure against a ceiling that is only a lower bound, at the optimistic end only."""
        if self.short_of_lower_bound(figure.basis) and not optimistic:
            return False
        share = figure.share_optimistic if optimistic else figure.share_pessimistic
        return figure.judged and meets_tolerance(share, 1.0, self.tolerance)
