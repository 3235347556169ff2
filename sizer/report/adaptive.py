"""A workload measured by an adaptive sweep (`sizer sweep --strategy adaptive`): which shapes were
measured and which the model predicts, and why the sweep stopped, from the record the sweep kept
with its calibration (`sizer.sweep.adaptive_run`). Pure functions of the sweeps' records."""

from __future__ import annotations

from typing import Any, Sequence

from sizer.store import SweepRow
from sizer.variants import Variant

RECORD_KEY = "adaptive"  # sizer.sweep.adaptive_run.RECORD_KEY (the report does not import the sweep)

_STOPPED = {
    "stable": "the answer held",
    "max points": "--max-points was reached",
    "grid measured": "every shape was measured",
    "time limit": "the time limit came first (--resume goes on)",
}


def adaptive_records(sweeps: Sequence[SweepRow]) -> list[dict[str, Any]]:
    """Every workload entry's record, of every adaptive sweep (a later sweep's first)."""
    out: list[dict[str, Any]] = []
    for sweep in sorted(sweeps, key=lambda s: s.id, reverse=True):
        record = (sweep.calibration or {}).get(RECORD_KEY)
        if isinstance(record, dict):
            out.extend(r for r in record.values() if isinstance(r, dict) and r.get("workload"))
    return out


def record_for(label: str, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The record of a fitted group (`label`: `name[k=v,...]`): of its workload, with no setting
    that contradicts the label's, the one naming most of them."""
    variant = Variant.from_label(label)
    wanted = {k: str(v) for k, v in variant.config.items()}

    def agreeing(record: dict[str, Any]) -> int | None:
        settings = {k: str(v) for k, v in (record.get("settings") or {}).items()}
        if record["workload"] != variant.workload or any(settings.get(k, v) != v for k, v in wanted.items()):
            return None
        return sum(1 for k in wanted if k in settings)

    scored = [(score, -i, r) for i, r in enumerate(records) if (score := agreeing(r)) is not None]
    return max(scored, key=lambda t: (t[0], t[1]))[2] if scored else None


def adaptive_summary(record: dict[str, Any]) -> dict[str, Any]:
    """The results.json fields of an adaptive record, with its line in words."""
    measured = record.get("measured") or []
    predicted = record.get("predicted") or []
    stopped = str(record.get("stopped") or "")
    text = (f"{len(measured)} of the grid's {record.get('grid_shapes', len(measured) + len(predicted))} shapes "
            f"measured ({record.get('points', 0)} points), the other {len(predicted)} predicted by the model; "
            f"stopped because {_STOPPED.get(stopped, stopped or 'it was not finished')}: {record.get('why', '')}")
    return {
        "points": record.get("points", 0),
        "grid_shapes": record.get("grid_shapes"),
        "measured": measured,
        "predicted": predicted,
        "stopped": stopped,
        "why": record.get("why", ""),
        "text": text,
    }


def attach_adaptive(workloads: list[dict[str, Any]], sweeps: Sequence[SweepRow]) -> None:
    """Each workload context measured adaptively gets `adaptive` (`adaptive_summary`); others None."""
    records = adaptive_records(sweeps)
    for wl in workloads:
        label = (wl.get("host") or {}).get("variant") or wl["workload"]
        record = record_for(label, records) if records else None
        wl["adaptive"] = None if record is None else adaptive_summary(record)
