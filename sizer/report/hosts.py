"""A report over the points of several hosts (a fleet sweep, stores gathered by `sizer merge`): a
workload measured on several hosts is fitted on each host's points alone, in a section per host, and
a table sets the hosts side by side. Points of two machines do not belong in one fit: their CPUs
differ, even of one kind. A workload measured on one host keeps its one section."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from sizer.model.grouping import variant_labels
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT, Variant


def host_labels(hosts: Sequence[dict[str, Any]]) -> dict[Any, str]:
    """Each host summary's name in the report: the fleet node types it offered, else its host name;
    made unique by its id where two share one."""
    labels = {h["id"]: str(h.get("fleet_node") or h.get("hostname") or f"host {h['id']}") for h in hosts}
    counts = Counter(labels.values())
    return {host_id: label if counts[label] == 1 else f"{label} #{host_id}" for host_id, label in labels.items()}


def points_by_host(points: Sequence[Point]) -> dict[Any, list[Point]]:
    """Points per host id (`Point.host_id`, which the store sets), hosts in the order they first come."""
    out: dict[Any, list[Point]] = {}
    for p in points:
        out.setdefault(p.host_id, []).append(p)
    return out


def shared_workloads(points: Sequence[Point]) -> set[str]:
    """The workloads the report splits by host: those with a variant whose real-input points come
    from more than one host. Variants measured each on a host of its own (CPU decoding on one,
    GPU decoding on another) keep their workload whole, with its ceiling."""
    labels = variant_labels(list(points))
    hosts: dict[str, set[Any]] = {}
    for p in points:
        if p.input != SYNTHETIC_INPUT:
            hosts.setdefault(labels[id(p)], set()).add(p.host_id)
    return {Variant.from_label(label).workload for label, ids in hosts.items() if len(ids) > 1}


def kind_counts(rows: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(points that measured a whole real instance, points that emulated a smaller shape)."""
    real = sum(1 for r in rows if r.get("real_instance"))
    return real, len(rows) - real


def side_by_side(workloads: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Per workload variant, each host's answer (its pick, knee and ceiling); None for one host."""
    labels = list(dict.fromkeys(wl["host"]["label"] for wl in workloads if wl.get("host")))
    if len(labels) < 2:
        return None
    rows: dict[str, dict[str, Any]] = {}
    for index, wl in enumerate(workloads, 1):  # the report's anchor of each section is wl-<index>
        if not wl.get("host"):
            continue
        chosen = (wl.get("recommendation") or {}).get("chosen") or {}
        real, emulated = kind_counts(wl.get("points") or [])
        rows.setdefault(wl["host"]["variant"], {})[wl["host"]["label"]] = {
            "index": index,
            "recommendation": chosen.get("instance_type"),
            "disk_class": chosen.get("disk_class"),
            "knee_vcpus": (wl.get("knee") or {}).get("predicted_vcpus"),
            "ceiling": wl.get("ceiling"),
            "unit": wl.get("unit"),
            "n_real": real,
            "n_emulated": emulated,
        }
    return {"hosts": labels, "rows": [{"workload": name, "by_host": by_host} for name, by_host in rows.items()]}
