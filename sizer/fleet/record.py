"""A fleet run in the one local store: a sweep per target and host, so each point keeps its host's
probe and a report can set hosts side by side.

Every sweep of a run carries its target's identity, the plan a node of the target made with the
fleet's targets (`target_identity`), plus the run's tag. `--resume` takes up the newest run whose
sweeps carry the same identities: their stored points are not measured again. A point no node
could measure (its node lost and no other of its type left, the host lock held too long) is stored
as an `error` point marked lost, with the reason: never lost silently, and measured again by
`--resume`, which then replaces the mark.
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from sizer.errors import SizerError
from sizer.fleet.node import NodeOutcome
from sizer.shapes import PlannedPoint
from sizer.store import Store
from sizer.sweep.plan import load_workload_classes
from workloads.protocol import ERROR, Result


def _normalized(value: dict[str, Any]) -> dict[str, Any]:
    """As the store gives it back (JSON: tuples as lists, keys sorted)."""
    normalized: dict[str, Any] = json.loads(json.dumps(value, sort_keys=True))
    return normalized


def target_identity(config: dict[str, Any], targets: Sequence[str], target: str, whole_node: bool) -> dict[str, Any]:
    """A target's plan identity: its node's plan config and the fleet's targets (a fleet of other
    targets is another sweep), and whether it measures whole nodes too."""
    fleet: dict[str, Any] = {"targets": sorted(targets), "target": target}
    if whole_node:
        fleet["whole_node"] = True
    return _normalized({**config, "fleet": fleet})


def is_lost(row: Any) -> bool:
    """A stored point that marks a lost measurement (`FleetRecord.record_lost`)."""
    try:
        fleet = json.loads(row["result"]).get("extra", {}).get("fleet", {})
    except (TypeError, ValueError, AttributeError):
        return False
    return isinstance(fleet, dict) and bool(fleet.get("lost"))


def _workload_facts(name: str) -> tuple[str, str]:
    """(framework, unit) of a workload, where this host knows it."""
    try:
        cls = load_workload_classes([name])[name]
    except SizerError:
        return "", ""
    return cls.framework, cls.unit


class FleetRecord:
    """The run's sweeps (one per target and host), the keys stored per target and the lost marks."""
    def __init__(self, store: Store, command: str, identities: dict[str, dict[str, Any]]):
        self.store, self.command, self.identities = store, command, identities
        self.run = ""  # the run's tag: its start time
        self.sweeps: dict[tuple[str, int], int] = {}  # (target, host id) -> sweep id
        self.done: dict[str, set[str]] = {t: set() for t in identities}  # measured (or failed measuring)
        self.lost: dict[str, dict[str, int]] = {t: {} for t in identities}  # key -> the sweep holding its mark
        self.stored: dict[tuple[str, str], Any] = {}  # (target, key) -> its row, for the summary

    # ------------------------------------------------------------ the run
    def open(self, resume: bool) -> bool:
        """With `resume`, take up the newest run of these identities; else start a new run. Whether
        a run was taken up."""
        runs = [self._run_of(s) for s in self.store.sweeps()] if resume else []
        found = [r for r in runs if r]
        if not found:
            self.run = f"{time.time():.6f}"
            return False
        self.run = max(found, key=float)
        for sweep in self.store.sweeps():
            target = self._target_of(sweep)
            if target is None:
                continue
            self.sweeps[(target, sweep.host_id)] = sweep.id
            for row in self.store.point_rows(sweep.id):
                if is_lost(row):
                    self.lost[target][row["key"]] = sweep.id
                else:
                    self.done[target].add(row["key"])
                    self.stored[(target, row["key"])] = row
        return True

    def _run_of(self, sweep: Any) -> str | None:
        fleet = sweep.config.get("fleet")
        if not isinstance(fleet, dict) or fleet.get("target") not in self.identities:
            return None
        stripped = {**sweep.config, "fleet": {k: v for k, v in fleet.items() if k != "run"}}
        return str(fleet.get("run")) if _normalized(stripped) == self.identities[fleet["target"]] else None

    def _target_of(self, sweep: Any) -> str | None:
        """The target of one of this run's sweeps, None for any other sweep."""
        return sweep.config["fleet"]["target"] if self._run_of(sweep) == self.run else None

    def sweep_for(self, target: str, host: dict[str, Any]) -> tuple[int, bool]:
        """The run's sweep of `target` on `host` (started where missing); whether it was started now."""
        host_id = self.store.upsert_host(host)
        if (target, host_id) in self.sweeps:
            return self.sweeps[(target, host_id)], False
        identity = self.identities[target]
        config = {**identity, "fleet": {**identity["fleet"], "run": self.run}}
        self.sweeps[(target, host_id)] = self.store.start_sweep(host_id, self.command, config)
        return self.sweeps[(target, host_id)], True

    def sweep_ids(self) -> list[int]:
        return sorted(self.sweeps.values())

    # ------------------------------------------------------------ points
    def commit(self, outcome: NodeOutcome, point: PlannedPoint) -> int:
        """Store a measured point in its host's sweep (replacing its lost mark); the sweep's id."""
        assert outcome.result is not None and outcome.host is not None, "a point measured on a known host"
        sweep_id, _ = self.sweep_for(outcome.target, outcome.host)
        self._drop_mark(outcome.target, point.key)
        self.store.add_point(sweep_id, point.key, point.shape.as_dict(), outcome.result, outcome.enforced,
                             outcome.started)
        self.done[outcome.target].add(point.key)
        return sweep_id

    def record_lost(self, target: str, point: PlannedPoint, reason: str, host: dict[str, Any]) -> Result:
        """Store `point` as not measured, with the reason, in the sweep of `host` (the node it was on
        where known, else the one that planned the target)."""
        sweep_id, _ = self.sweep_for(target, host)
        self._drop_mark(target, point.key)
        framework, unit = _workload_facts(point.workload)
        result = Result(workload=point.workload, framework=framework, unit=unit, profile=point.profile,
                        status=ERROR, error=f"lost: {reason}", config=dict(point.config),
                        extra={"shape": point.shape.as_dict(), "fleet": {"target": target, "lost": True}})
        self.store.add_point(sweep_id, point.key, point.shape.as_dict(), result, {}, time.time())
        self.lost[target][point.key] = sweep_id
        return result

    def _drop_mark(self, target: str, key: str) -> None:
        sweep_id = self.lost[target].pop(key, None)
        if sweep_id is not None:
            self.store.remove_point(sweep_id, key)

    def finish(self, planned: dict[str, list[PlannedPoint]]) -> list[str]:
        """Close the sweeps of each target whose every point is stored and none lost; the targets left open."""
        open_targets = []
        for target, points in planned.items():
            if self.lost[target] or any(p.key not in self.done[target] for p in points):
                open_targets.append(target)
                continue
            for (swept, _), sweep_id in self.sweeps.items():
                if swept == target:
                    self.store.finish_sweep(sweep_id)
        return open_targets
