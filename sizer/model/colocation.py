"""Predicting the slowdown of two jobs on one GPU from each job's profile alone (docs/design.md,
"Two jobs on one GPU"). Pure: profiles and measured pairs in, predictions out.

    r_AB = g_AB * (1 + kappa * u_B + beta * x_B + gamma * c_B)

- g_AB, the GPU's time shared out: each job asks for the share of the GPU's time it kept the GPU
  busy alone (u_A, u_B); where together they ask for more than the whole, the GPU's time goes out
  max-min fair (a job asking for at most half gets what it asks, the other the rest) and A runs at
  its share over its ask: g_AB = u_A / share_A, else 1.
- kappa u_B: the GPU's switches between the jobs. Time-sliced, a kernel of A waits behind B's
  context; the more of the GPU's time B keeps, the longer.
- beta x_B: host I/O. B's host-to-device copies (GB/s, NVML's PCIe counter) contend with A's for
  the host's memory and PCIe link, which the seed study found to be where sharing's slowdown came
  from (the GPU's occupancy stayed the same while copies slowed).
- gamma c_B: the host beside the GPU. Each job has its own cores, but they share the memory
  bandwidth and last-level cache; B's CPU use per vCPU says how hard it presses on them.

kappa, beta and gamma (>= 0) are fitted by non-negative least squares on the relative error of r
over the measured pairs of one sharing mode (time-sliced and MPS differ); a term whose input some
profile lacks is left out of that fit. Without a measured pair the model is g alone.

A prediction's range: with at least MIN_PAIRS_FOR_RANGE measured pairs, the prediction times the
smallest and the largest ratio of measured to predicted r over the pairs each left out in turn;
with fewer, from g (no cost of sharing beyond the GPU's time) to g (1 + u_B) (every second B keeps
the GPU busy delays A by as much), widened to hold the prediction.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.optimize import nnls

from sizer.model.pairs import JobProfile, PairRecord, shared_is_faster
from sizer.values import significant

TERMS = ("gpu", "copy", "cpu")  # kappa, beta, gamma
MIN_PAIRS_FOR_RANGE = 3


def gpu_share_factor(u_a: float | None, u_b: float | None) -> float:
    """g_AB: how much slower A runs on the share of the GPU's time it gets beside B (see the module)."""
    if not u_a or u_a <= 0:
        return 1.0
    u_b = max(0.0, u_b or 0.0)
    if u_a + u_b <= 1.0:
        return 1.0
    share = u_a if u_a <= 0.5 else (1.0 - u_b if u_b <= 0.5 else 0.5)
    return u_a / share


def partner_terms(partner: JobProfile) -> dict[str, float | None]:
    """The partner's inputs of the model's terms: its GPU busy share, its copies (GB/s), its CPU use."""
    return {"gpu": partner.gpu_busy, "copy": partner.copy_gbps, "cpu": partner.cpu_busy}


@dataclass(frozen=True)
class Observation:
    """One measured slowdown: job `job` beside `partner`, in pair `pair`."""

    pair: str
    job: JobProfile
    partner: JobProfile
    slowdown: float


def observations(records: Sequence[PairRecord], sharing: str) -> list[Observation]:
    """Both slowdowns of every measured pair of `sharing` (a pair whose jobs both have a profile)."""
    out = []
    for record in records:
        a, b = record.alone
        r_ab, r_ba = record.slowdowns
        if record.sharing != sharing or a is None or b is None or r_ab is None or r_ba is None:
            continue
        out += [Observation(record.key, a, b, r_ab), Observation(record.key, b, a, r_ba)]
    return out


def _fitted(obs: Sequence[Observation]) -> dict[str, float]:
    """kappa, beta, gamma by non-negative least squares on relative error, over the terms every
    observation has an input for."""
    terms = [t for t in TERMS if obs and all(partner_terms(o.partner)[t] is not None for o in obs)]
    if not terms:
        return {}
    g = np.array([gpu_share_factor(o.job.gpu_busy, o.partner.gpu_busy) for o in obs])
    r = np.array([o.slowdown for o in obs])
    x = np.array([[float(partner_terms(o.partner)[t] or 0.0) for t in terms] for o in obs])
    weight = g / r  # (g (1 + x theta) - r) / r = weight * (x theta - (r / g - 1))
    theta, _ = nnls(x * weight[:, None], (r / g - 1.0) * weight)
    return {t: float(v) for t, v in zip(terms, theta)}


def _predict(coefficients: dict[str, float], job: JobProfile, partner: JobProfile) -> float:
    terms = partner_terms(partner)
    overhead = sum(c * float(terms[t] or 0.0) for t, c in coefficients.items())
    return gpu_share_factor(job.gpu_busy, partner.gpu_busy) * (1.0 + overhead)


@dataclass(frozen=True)
class HeldOut:
    """A measured slowdown against the model fitted without its pair."""

    pair: str
    job: str
    partner: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1.0


def held_out(records: Sequence[PairRecord], sharing: str) -> list[HeldOut]:
    """Each measured pair of `sharing` left out in turn: the model fitted on the others predicts both
    its slowdowns."""
    obs = observations(records, sharing)
    out = []
    for pair in dict.fromkeys(o.pair for o in obs):
        coefficients = _fitted([o for o in obs if o.pair != pair])
        out += [HeldOut(pair, o.job.job, o.partner.job, o.slowdown, _predict(coefficients, o.job, o.partner))
                for o in obs if o.pair == pair]
    return out


@dataclass(frozen=True)
class SlowdownPrediction:
    """r_AB predicted, with its range and what it rests on."""

    job: str
    partner: str
    slowdown: float
    low: float
    high: float
    basis: str


@dataclass(frozen=True)
class ColocationModel:
    """The model of one sharing mode: its fitted coefficients, the measured pairs they rest on, and
    the held-out ratios of measured to predicted r that give a prediction its range."""

    sharing: str
    coefficients: tuple[tuple[str, float], ...]
    pairs: int
    held_out: tuple[HeldOut, ...]

    @property
    def ratio_range(self) -> tuple[float, float] | None:
        """The smallest and largest measured / predicted r held out, where enough pairs were."""
        if self.pairs < MIN_PAIRS_FOR_RANGE or not self.held_out:
            return None
        ratios = [h.measured / h.predicted for h in self.held_out]
        return min(min(ratios), 1.0), max(max(ratios), 1.0)

    @property
    def mean_error(self) -> float | None:
        """The mean of |predicted / measured - 1| over the slowdowns held out."""
        return statistics.mean(abs(h.error) for h in self.held_out) if self.held_out else None

    @property
    def basis(self) -> str:
        if not self.pairs:
            return f"the GPU's time shared out alone: no {self.sharing}-shared pair measured to fit the rest on"
        fitted = ", ".join(f"{name} {value:.3g}" for name, value in self.coefficients) or "no term"
        held = "" if self.mean_error is None else f", held-out error {self.mean_error:.1%} (mean)"
        return f"fitted on {self.pairs} measured pair(s) ({fitted}){held}"

    def predict(self, job: JobProfile, partner: JobProfile) -> SlowdownPrediction:
        """r of `job` beside `partner`, with its range (see the module)."""
        r = _predict(dict(self.coefficients), job, partner)
        ratios = self.ratio_range
        if ratios is not None:
            low, high = r * ratios[0], r * ratios[1]
        else:
            g = gpu_share_factor(job.gpu_busy, partner.gpu_busy)
            low, high = min(g, r), max(g * (1.0 + (partner.gpu_busy or 0.0)), r)
        return SlowdownPrediction(job.job, partner.job, r, low, high, self.basis)

    def summary(self) -> dict[str, Any]:
        return {
            "sharing": self.sharing,
            "coefficients": {name: significant(value, 4) for name, value in self.coefficients},
            "pairs": self.pairs,
            "held_out": [{"pair": h.pair, "job": h.job, "partner": h.partner, "measured": significant(h.measured, 4),
                          "predicted": significant(h.predicted, 4), "error": significant(h.error, 4)}
                         for h in self.held_out],
            "mean_error": significant(self.mean_error, 4),
            "ratio_range": None if self.ratio_range is None else [significant(v, 4) for v in self.ratio_range],
            "basis": self.basis,
        }


def fit_colocation(records: Sequence[PairRecord], sharing: str) -> ColocationModel:
    """The model of `sharing` fitted on every measured pair of it, with each pair held out in turn."""
    obs = observations(records, sharing)
    coefficients = tuple(sorted(_fitted(obs).items(), key=lambda kv: TERMS.index(kv[0])))
    return ColocationModel(sharing, coefficients, len({o.pair for o in obs}), tuple(held_out(records, sharing)))


def predicted_verdict(ab: SlowdownPrediction, ba: SlowdownPrediction) -> str:
    """Whether sharing is faster by the predicted slowdowns: "yes" or "no" where both ends of the
    ranges agree, else "open"."""
    if shared_is_faster(ab.high, ba.high):
        return "yes"
    if not shared_is_faster(ab.low, ba.low):
        return "no"
    return "open"
