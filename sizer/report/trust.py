"""How far a workload's answers hold: whether its model predicts well enough to size from, the
range of its vCPU knee over the host speeds the sweep saw, and the model's range at each measured
shape (`sizer.model.uncertainty`). Pure functions of the fit and its points."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from sizer.points import Point
from sizer.report.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT

if TYPE_CHECKING:  # the model loads scipy: only when a report is built
    from sizer.model.uncertainty import FitDraws


def model_trust(fit: Any, tolerance: float) -> dict[str, Any]:
    """Whether the model is trusted to predict shapes nobody measured, and why."""
    from sizer.model.tolerance import TRUST_FACTOR, model_trusted

    held_out = finite_number(getattr(fit, "loo_max_ape", None))
    trusted = model_trusted(held_out, tolerance)
    note = None if trusted else (
        f"Model not trusted: it misses held-out shapes by up to {held_out:.0%}, more than {TRUST_FACTOR:g} times "
        f"the {tolerance:.0%} tolerance. Instances are judged from the measured shapes they contain only.")
    return {"trusted": trusted, "held_out_max": held_out, "limit": TRUST_FACTOR * tolerance, "note": note}


def knee_range_summary(fit: Any, draws: FitDraws, tolerance: float, confidence: float, ram_gib: float,
                       disk_mbps: float | None, max_vcpus: int) -> dict[str, Any]:
    """The model's vCPU knee at the optimistic (`low`) and the pessimistic (`high`) end of the host
    speeds, with the factors on the CPU term those ends stand for (None: not reached by `max_vcpus`)."""
    from sizer.model.uncertainty import knee_range

    low, high = knee_range(fit, draws, tolerance, confidence, ram_gib, disk_mbps, max_vcpus)
    factors = sorted((draws.factor(confidence, pessimistic=True), draws.factor(confidence, pessimistic=False)))
    return {
        "low": low,
        "high": high,
        "confidence": confidence,
        "searched_up_to": max_vcpus,
        "cpu_speed_low": significant(factors[0], 3),
        "cpu_speed_high": None if draws.cpu_open else significant(factors[1], 3),
    }


def add_point_ranges(rows: list[dict[str, Any]], points: Sequence[Point], fit: Any, draws: FitDraws,
                     confidence: float) -> None:
    """Each usable real-input point's row gets the model's range at its shape, as it was measured."""
    from sizer.model.uncertainty import model_range

    for row, p in zip(rows, points):
        if not p.usable or p.input == SYNTHETIC_INPUT:
            continue
        low, high = model_range(draws, fit.predict_measured(p), confidence)
        row["predicted_low"], row["predicted_high"] = significant(low, 6), significant(high, 6)


def host_speed_timelines(sweeps: Sequence[Any]) -> list[dict[str, Any]]:
    """The host's speed over each sweep that recorded it (`calibration["timeline"]`: the calibration
    repeated at the start, during and at the end), each repeat against the first, and how far the
    medians moved over the sweep. Sweeps without one (older stores) give nothing."""
    out = []
    for s in sweeps:
        timeline = (getattr(s, "calibration", None) or {}).get("timeline") or []
        rows = [t for t in timeline if isinstance(t, dict) and finite_number(t.get("median"))]
        if not rows:
            continue
        first = float(rows[0]["median"])
        medians = [float(t["median"]) for t in rows]
        middle = sorted(medians)[len(medians) // 2]
        out.append({
            "sweep": getattr(s, "id", None),
            "rows": [{"at_s": finite_number(t.get("at_s")), "median": significant(float(t["median"]), 4),
                      "spread": finite_number(t.get("spread")), "repeats": len(t.get("ips") or []),
                      "vs_first": significant(float(t["median"]) / first, 4) if first > 0 else None} for t in rows],
            "moved": significant((max(medians) - min(medians)) / middle, 3) if middle > 0 else None,
        })
    return out
