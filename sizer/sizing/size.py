"""`size`: one fitted workload sized against the target's catalog, computed once.

The knee and its range, the RAM each disk class needs and the pick with its range all come from
one draw of the fit's ranges, with the host's speeds over the sweeps that measured it. The report,
`sizer recommend` and the adaptive sweep call this and nothing else computes these answers, so
they cannot disagree about them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from sizer.catalog import InstanceType, normalize_gpu
from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.fingerprint import CpuTranslation, HostFingerprint, translate
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE, check_confidence, check_tolerance
from sizer.model import WorkloadFit
from sizer.model.uncertainty import FitDraws, fit_draws, host_speeds
from sizer.points import Point
from sizer.recommend import Option, Recommendation, recommend
from sizer.sizing.knee import (
    KneeInputs,
    KneeRangeSummary,
    MeasuredKnee,
    fit_ceiling,
    knee_inputs,
    knee_range_summary,
    measured_knees,
    predicted_knee,
)
from sizer.sizing.ram import DiskNeed, OutOfMemory, least_needs, out_of_memory, ram_needs


@dataclass(frozen=True)
class SizingTerms:
    """What a workload is sized against, checked where it enters: the target GPU's catalog rows and
    the disk-class table; the tolerance and the confidence of every range; a stated dataset size
    (GiB) and job (samples); the target CPU (`target_calibration`: a host fingerprint, or a one-vCPU
    rate in images/s; None: the measuring host's CPU) and the measuring host's fingerprint
    (`measured_host`, from its sweeps: `target.measured_fingerprint`), whose ratio translates the CPU
    term (`sizer.fingerprint.translate`); each sweep's host speeds over its run
    (`target.sweep_host_speeds`); and, where a caller asks what the pick would be under one
    verdict, whether the model is trusted."""

    catalog: tuple[InstanceType, ...]
    target: str
    disk_classes: Mapping[str, DiskClass]
    tolerance: float = DEFAULT_TOLERANCE
    confidence: float = DEFAULT_CONFIDENCE
    dataset_gib: float | None = None
    job_samples: float | None = None
    target_calibration: float | HostFingerprint | None = None
    host_speeds: tuple[tuple[float, ...], ...] = ()
    trusted: bool | None = None
    measured_host: HostFingerprint | None = None

    def __post_init__(self) -> None:
        check_tolerance(self.tolerance)
        check_confidence(self.confidence)
        target = None if isinstance(self.target_calibration, HostFingerprint) else self.target_calibration
        for name, value in (("dataset size (GiB)", self.dataset_gib), ("job samples", self.job_samples),
                            ("target calibration", target)):
            if value is not None and not value > 0:
                raise SizerError(f"the {name} must be > 0, got {value:g}")
        object.__setattr__(self, "target", normalize_gpu(self.target))
        object.__setattr__(self, "catalog", tuple(self.catalog))

    def translation(self, fit: WorkloadFit) -> CpuTranslation:
        """How the fit's CPU-side figures are carried to the CPU the answer is for."""
        return translate(self.measured_host, fit.calibration_ips, self.target_calibration)


@dataclass(frozen=True)
class Sizing:
    """One workload's answers (see the module). `recommendation` is None where the catalog could not
    be sized, with the reason in `catalog_error`."""

    fit: WorkloadFit
    terms: SizingTerms
    ceiling: float | None
    inputs: KneeInputs
    knee: int | None
    knee_range: KneeRangeSummary
    measured_knees: tuple[MeasuredKnee, ...]
    ram: tuple[DiskNeed, ...]
    out_of_memory: tuple[OutOfMemory, ...]
    recommendation: Recommendation | None
    catalog_error: str | None
    draws: FitDraws = field(repr=False)
    translation: CpuTranslation | None = None

    @property
    def chosen(self) -> Option | None:
        return None if self.recommendation is None else self.recommendation.chosen

    @property
    def pick(self) -> tuple[str | None, str | None]:
        """The chosen instance ("cloud:type") and disk class, (None, None) where nothing is chosen."""
        return option_pick(self.chosen)

    @property
    def stable(self) -> bool:
        """Whether the pick is the same at both ends of the ranges."""
        return self.recommendation is None or self.recommendation.optimistic is None

    @property
    def needs(self) -> tuple[str | None, float | None]:
        """The slowest disk class that needs the least RAM, and that RAM (GiB)."""
        return least_needs(self.ram)

    def pick_if(self, trusted: bool) -> tuple[str | None, str | None]:
        """The pick were the model trusted (or not): the same terms, the verdict given."""
        rec = _recommendation(self.fit, dataclasses.replace(self.terms, trusted=trusted))[0]
        return option_pick(None if rec is None else rec.chosen)


def option_pick(option: Option | None) -> tuple[str | None, str | None]:
    if option is None:
        return None, None
    return f"{option.instance.cloud}:{option.instance.instance_type}", option.disk_class


def _recommendation(fit: WorkloadFit, terms: SizingTerms) -> tuple[Recommendation | None, str | None]:
    """The recommendation, or why the catalog could not be sized (its SizerError's message)."""
    try:
        rec = recommend(fit, list(terms.catalog), terms.target, tolerance=terms.tolerance,
                        disk_classes=dict(terms.disk_classes), job_samples=terms.job_samples,
                        cpu_scale=terms.translation(fit).factor,
                        confidence=terms.confidence, trusted=terms.trusted)
    except SizerError as exc:
        return None, str(exc)
    return rec, None


def size(points: Sequence[Point], fit: WorkloadFit, terms: SizingTerms) -> Sizing:
    """Size one fitted workload (`points`: the fitted group's points, each shape once)."""
    ceiling = fit_ceiling(fit)
    at = knee_inputs(points, fit, terms.dataset_gib)
    translation = terms.translation(fit)
    knee = predicted_knee(fit, ceiling, terms.tolerance, at, translation.factor)
    draws = fit_draws(fit, host=host_speeds([list(ips) for ips in terms.host_speeds]))
    measured = tuple(measured_knees(points, ceiling, terms.tolerance, fit.ceiling_name))
    knee_range = knee_range_summary(fit, draws, terms.tolerance, terms.confidence, at, measured, translation.factor)
    ram = tuple(ram_needs(fit, ceiling, terms.tolerance, knee or at.vcpus_max, at.disks, at.ram_high))
    rec, error = _recommendation(fit, terms)
    return Sizing(fit, terms, ceiling, at, knee, knee_range, measured, ram, tuple(out_of_memory(points)), rec, error,
                  draws, translation)
