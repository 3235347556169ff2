"""How far a workload's answers hold, as the report shows it: whether its model predicts well
enough to size from, the model's range at each measured shape (`sizer.model.uncertainty`), and the
host's speed over each sweep. Pure functions of the fit, its points and the sweeps' records."""

from __future__ import annotations

from typing import Any, Sequence

from sizer.model import WorkloadFit
from sizer.model.decision import fit_trusted, untrusted_words
from sizer.model.tolerance import MIN_HELD_OUT, TRUST_FACTOR
from sizer.model.uncertainty import FitDraws, model_range
from sizer.points import Point
from sizer.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT


def model_trust(fit: WorkloadFit, tolerance: float) -> dict[str, Any]:
    """Whether the model is trusted to predict shapes nobody measured, and why."""
    trusted = fit_trusted(fit, tolerance)
    note = None if trusted else (
        f"Model not trusted: {untrusted_words(fit, tolerance)}. Instances are judged from the measured shapes "
        "they contain only.")
    return {"trusted": trusted, "held_out_max": finite_number(fit.loo_max_ape), "held_out_shapes": len(fit.loo),
            "min_held_out": MIN_HELD_OUT, "limit": TRUST_FACTOR * tolerance, "note": note}


def add_point_ranges(rows: list[dict[str, Any]], points: Sequence[Point], fit: WorkloadFit, draws: FitDraws,
                     confidence: float) -> None:
    """Each usable real-input point's row gets the model's range at its shape, as it was measured."""
    for row, p in zip(rows, points):
        if not p.usable or p.input == SYNTHETIC_INPUT:
            continue
        low, high = model_range(draws, fit.predict_measured(p), confidence)
        row["predicted_low"], row["predicted_high"] = significant(low, 6), significant(high, 6)


def host_speed_timelines(calibrations: Sequence[tuple[int, dict[str, Any] | None]]) -> list[dict[str, Any]]:
    """The host's speed over each sweep that recorded it (`(sweep id, calibration record)` pairs,
    whose `timeline` is the calibration repeated at the start, during and at the end), each repeat
    against the first, and how far the medians moved over the sweep. Sweeps without one give nothing."""
    out = []
    for sweep_id, calibration in calibrations:
        timeline = (calibration or {}).get("timeline") or []
        rows = [t for t in timeline if isinstance(t, dict) and finite_number(t.get("median"))]
        if not rows:
            continue
        first = float(rows[0]["median"])
        medians = [float(t["median"]) for t in rows]
        middle = sorted(medians)[len(medians) // 2]
        out.append({
            "sweep": sweep_id,
            "rows": [{"at_s": finite_number(t.get("at_s")), "median": significant(float(t["median"]), 4),
                      "spread": finite_number(t.get("spread")), "repeats": len(t.get("ips") or []),
                      "vs_first": significant(float(t["median"]) / first, 4) if first > 0 else None} for t in rows],
            "moved": significant((max(medians) - min(medians)) / middle, 3) if middle > 0 else None,
        })
    return out
