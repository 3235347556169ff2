"""The report's inputs: points, sweeps and enforcement records from a store or a points file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from sizer.errors import SizerError
from sizer.facts import with_facts
from sizer.points import read_points_csv
from sizer.store import Store


def _enforcement_record(row: Any) -> dict[str, Any]:
    """One stored point's shape with how its limits were enforced (an unreadable record adds nothing)."""
    try:
        record = json.loads(row["enforced"] or "{}")
    except json.JSONDecodeError:
        record = {}
    return {
        "workload": row["workload"],
        "vcpus": row["vcpus"],
        "ram_gib": row["ram_gib"],
        "disk_class": row["disk_class"],
        **(record if isinstance(record, dict) else {}),
    }


def inputs_from_store(store: Any, sweep_id: int | None = None) -> dict[str, Any]:
    """Points, sweeps and enforcement records of a store (or of one sweep), as build_context takes them."""
    rows = list(store.point_rows(sweep_id))
    enforcement = [_enforcement_record(row) for row in rows]
    sweeps = [s for s in store.sweeps() if sweep_id is None or s.id == sweep_id]
    return {"points": with_facts(store.points(sweep_id)), "sweeps": sweeps, "enforcement": enforcement}


def inputs_from_sweeps(store: Any, sweep_ids: Iterable[int]) -> dict[str, Any]:
    """`inputs_from_store` over several sweeps of a store (a fleet run's: one per target and host)."""
    parts = [inputs_from_store(store, sweep_id) for sweep_id in sweep_ids]
    return {key: [item for part in parts for item in part[key]] for key in ("points", "sweeps", "enforcement")}


def load_inputs(store: str | Path | None, input_file: str | Path | None,
                disk_classes: Iterable[str] | None = None) -> dict[str, Any]:
    """Points (and, from a store, sweeps and enforcement) from exactly one of a store or a points
    file; a points file's disk classes must be among `disk_classes` (default: the built-in table)."""
    if store and input_file:
        raise SizerError("give either --store or --input, not both")
    if input_file:
        points = with_facts(read_points_csv(input_file, disk_classes))
        return {"points": points, "sweeps": [], "enforcement": None, "source": str(input_file)}
    if not store:
        raise SizerError("give --store PATH (a sweep's store, e.g. results/sizer.sqlite) or --input points.csv")
    with Store(store, create=False) as opened:
        data = inputs_from_store(opened)
    if not data["points"]:
        raise SizerError(f"the store {store} holds no points yet (run `sizer sweep --store {store}`)")
    return {**data, "source": str(store)}
