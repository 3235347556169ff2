"""How a sweep chooses its points (`--strategy`): a grid measures every planned shape; an adaptive
sweep measures, per workload entry, the shapes where the answer can still change (`adaptive`,
`adaptive_run`). What the plan and the dry run need to know of that choice lives here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sizer.errors import SizerError
from sizer.shapes import MAX_PASSES, PlannedPoint
from sizer.variants import Variant

# Measurements of each shape an adaptive sweep takes without --passes: None, one and a second where
# its spread or the answer's sensitivity to it asks (`sizer.sweep.adaptive`).
DEFAULT_PASSES: int | None = None
STRATEGIES = ("grid", "adaptive")


def check_strategy(strategy: str, max_points: int | None, passes: int | None, refine: int | None,
                   gpus: list[int] | None, fleet: Any) -> None:
    """`--strategy` and `--max-points` and what an adaptive sweep cannot be combined with."""
    if strategy not in STRATEGIES:
        raise SizerError(f"--strategy wants one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if max_points is not None and max_points < 1:
        raise SizerError(f"--max-points wants 1 or more measurements per workload, got {max_points}")
    if strategy == "grid":
        if max_points is not None:
            raise SizerError("--max-points caps an adaptive sweep: give it with --strategy adaptive")
        return
    if passes is not None and not 1 <= passes <= MAX_PASSES:
        raise SizerError(f"--passes wants 1 to {MAX_PASSES} measurements of each shape, got {passes}")
    if refine not in (None, 0):
        raise SizerError("--strategy adaptive measures a shape again where that can change the answer: "
                         "leave out --refine")
    if gpus and sorted(set(gpus)) != [1]:
        raise SizerError("--strategy adaptive sizes one GPU's shapes: leave out --gpus")
    if fleet is not None:
        raise SizerError("--strategy adaptive chooses each point from the ones stored before it, on this host: "
                         "leave out --ray (--parallel K measures K points at once here)")


@dataclass
class Entry:
    """One workload entry of the plan: its label, settings and grid as a one-pass plan."""

    label: str
    workload: str
    settings: dict[str, Any]
    candidates: list[PlannedPoint]


def plan_entries(points: list[PlannedPoint]) -> list[Entry]:
    """The plan's workload entries in plan order, each with its workload's GPU ceiling point."""
    ceilings = {p.workload: p for p in points if p.ceiling and p.pass_no == 1}
    entries: dict[tuple, Entry] = {}
    for p in points:
        if p.ceiling or p.pass_no != 1:
            continue
        key = (p.workload, tuple(sorted((k, str(v)) for k, v in p.config.items())))
        if key not in entries:
            entries[key] = Entry(Variant.of(p.workload, p.config).label, p.workload, dict(p.config), [])
            if p.workload in ceilings:
                entries[key].candidates.append(ceilings[p.workload])
        entries[key].candidates.append(p)
    return list(entries.values())


def adaptive_passes(passes: int | None) -> int | None:
    """The measurements an adaptive sweep takes of each shape: --passes, else DEFAULT_PASSES (None:
    one, and a second where asked)."""
    return DEFAULT_PASSES if passes is None else passes


def entry_most(entry: Entry, max_points: int | None, passes: int | None) -> int:
    """The most measurements an adaptive sweep takes of an entry: every shape's passes (two where
    passes are not fixed; its GPU ceiling once), or --max-points where fewer."""
    each = 2 if passes is None else passes
    grid = sum(1 if c.ceiling else each for c in entry.candidates)
    return grid if max_points is None else min(max_points, grid)
