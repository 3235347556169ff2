"""How far a workload's answers hold: whether its model predicts well enough to size from, the
range of its vCPU knee over the host speeds the sweep saw, and the model's range at each measured
shape (`sizer.model.uncertainty`). Pure functions of the fit and its points.

The knee range is open above (`beyond_measured`) where the measurements do not settle it: the
plateau was not reached at any measured count, or first at a count so close to the highest measured
one that no measured count has the vCPUs a host at the range's pessimistic speed would need (the
knee divided by that speed) and reaches the plateau; or the model's pessimistic knee itself lies
beyond the highest measured count. The knee may then lie anywhere above that count."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from sizer.points import Point
from sizer.report.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT

if TYPE_CHECKING:  # the model loads scipy: only when a report is built
    from sizer.model.uncertainty import FitDraws


def model_trust(fit: Any, tolerance: float) -> dict[str, Any]:
    """Whether the model is trusted to predict shapes nobody measured, and why."""
    from sizer.model.decision import fit_trusted, untrusted_words
    from sizer.model.tolerance import MIN_HELD_OUT, TRUST_FACTOR

    held_out = finite_number(getattr(fit, "loo_max_ape", None))
    trusted = fit_trusted(fit, tolerance)
    note = None if trusted else (
        f"Model not trusted: {untrusted_words(fit, tolerance)}. Instances are judged from the measured shapes "
        "they contain only.")
    return {"trusted": trusted, "held_out_max": held_out, "held_out_shapes": len(fit.loo),
            "min_held_out": MIN_HELD_OUT, "limit": TRUST_FACTOR * tolerance, "note": note}


def knee_range_summary(fit: Any, draws: FitDraws, tolerance: float, confidence: float, ram_gib: float,
                       disk_mbps: float | None, max_vcpus: int,
                       measured: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The model's vCPU knee at the optimistic (`low`) and the pessimistic (`high`) end of the host
    speeds (None: not reached by `max_vcpus`), with the factors on the CPU term those ends stand
    for, the model's own error added to both (as at the pessimistic knee), and whether the range is
    open above (see the module; `measured`: the measured knee rows, `analysis.vcpu_knee`)."""
    from sizer.model.uncertainty import knee_range

    knee = knee_range(fit, draws, tolerance, confidence, ram_gib, disk_mbps, max_vcpus)
    factors = sorted((knee.pessimistic, knee.optimistic))
    top = max((v for row in measured for v in row["measured_vcpus"]), default=None)
    reason = open_reason(knee.high, top, measured, factors[0])
    return {
        "low": knee.low,
        "high": knee.high,
        "confidence": confidence,
        "searched_up_to": max_vcpus,
        "cpu_speed_low": significant(factors[0], 3),
        "cpu_speed_high": None if draws.cpu_open else significant(factors[1], 3),
        "model_error": significant(knee.model_error, 3),
        "host_timeline": draws.host is not None,
        "measured_up_to": top,
        "beyond_measured": reason is not None,
        "open_reason": reason,
    }


def plateau_settled(row: dict[str, Any], speed: float) -> bool:
    """Whether one decode mode's measurements settle its knee at a host `speed` times as fast (at most
    1): a measured count with at least the knee's vCPUs divided by that speed reaches the plateau."""
    knee = row["knee_vcpus"]
    if knee is None:
        return False
    needed = knee / min(max(speed, 1e-9), 1.0)
    return any(r["vcpus"] >= needed - 1e-9 and r["throughput"] >= row["bound"] for r in row["by_vcpus"])


def open_reason(high: int | None, top: int | None, measured: Sequence[dict[str, Any]], speed: float) -> str | None:
    """Why the knee range is open above (see the module), in words; None where it is not."""
    if top is None:
        return None
    if any(row["knee_vcpus"] is None for row in measured):
        return f"the measurements did not reach the plateau by {top} vCPUs"
    unsettled = [row for row in measured if not plateau_settled(row, speed)]
    if unsettled:
        knee = max(row["knee_vcpus"] for row in unsettled)
        if knee >= top:
            return (f"the measurements first reach the plateau at their highest count, {top} vCPUs: a host "
                    f"{1 - speed:.0%} slower would need more")
        return (f"the measurements reach the plateau at {knee} vCPUs, but a host {1 - speed:.0%} slower would need "
                f"{knee / speed:.3g}, and no measured count from there shows the plateau")
    if high is None or high > top:
        return f"the model's pessimistic knee lies beyond the highest measured count ({top} vCPUs)"
    return None


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


def sweep_host_speeds(sweeps: Sequence[Any]) -> tuple[tuple[float, ...], ...]:
    """Per sweep that recorded its host's speed, every calibration repeat of its timeline (images/s)."""
    out = []
    for s in sweeps:
        timeline = (getattr(s, "calibration", None) or {}).get("timeline") or []
        ips = [float(x) for t in timeline if isinstance(t, dict) for x in (t.get("ips") or [])
               if finite_number(x) and float(x) > 0]
        if ips:
            out.append(tuple(ips))
    return tuple(out)
