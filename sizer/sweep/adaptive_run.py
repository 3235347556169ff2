"""`sizer sweep --strategy adaptive`: the adaptive loop (`sizer.sweep.adaptive`) over a sweep's run.

Per workload entry of the plan, in plan order: ask the chooser for the next shape given what the
store holds of the entry, measure it through the sweep's own `visit` (limits, commit point by
point, the time limit of `--max-time`), and go on until the chooser stops or the slice has no time
for the next point. What stopped each entry is kept in the sweep's record (`record`), where the
report finds it: the shapes measured and how often, the shapes the model predicts, and why it stopped.

The chooser sees only the stored points, in the order they were stored: a killed sweep resumed with
`--resume` makes the same choices.
"""

from __future__ import annotations

from typing import Any, Mapping

from sizer.diskclasses import DiskClass
from sizer.facts import with_facts
from sizer.points import Point
from sizer.shapes import PlannedPoint, shape_key
from sizer.sizing import SizingTerms, host_gpu_names, sweep_host_speeds, target_catalog, target_gpu
from sizer.store import Store
from sizer.sweep.adaptive import STOP_TIME, AdaptiveChooser, AdaptiveTerms, Step, shape_counts
from sizer.sweep.plan import SweepOptions
from sizer.sweep.state import SweepRun
from sizer.sweep.strategy import Entry, adaptive_passes, entry_most, plan_entries

RECORD_KEY = "adaptive"  # the key of the adaptive record in the sweep's calibration record


def adaptive_terms(store: Store, sweep_id: int, opts: SweepOptions, disk_table: Mapping[str, DiskClass]) -> AdaptiveTerms:
    """The target GPU (`--gpu`, else the host's, else the report's default), its catalog rows and
    the host's speed over the sweep so far, as the sweep's report will judge them."""
    host = store.sweep_host(sweep_id)
    target, _ = target_gpu(opts.gpu, host_gpu_names(host[1] if host else None))
    catalog = tuple(target_catalog(target, opts.gpu, opts.catalog_files))
    calibration = next((s.calibration for s in store.sweeps() if s.id == sweep_id), None)
    sizing = SizingTerms(catalog, target, disk_table, confidence=opts.confidence,
                         host_speeds=sweep_host_speeds([calibration]))
    return AdaptiveTerms(sizing, max_points=opts.max_points, passes=adaptive_passes(opts.passes))


def stored_pairs(sweep: SweepRun, entry: Entry) -> list[tuple[str, Point]]:
    """The entry's stored (key, point) pairs in the order they were stored."""
    bases = {c.key for c in entry.candidates}
    rows = list(sweep.store.point_rows(sweep.sweep_id))
    points = with_facts(sweep.store.points(sweep.sweep_id))
    return [(row["key"], point) for row, point in zip(rows, points) if shape_key(row["key"]) in bases]


def measure_adaptively(sweep: SweepRun) -> None:
    """Each entry's adaptive loop on an opened, prepared sweep (`sizer.sweep.state.SweepRun`)."""
    entries = plan_entries(sweep.plan.points)
    terms = adaptive_terms(sweep.store, sweep.sweep_id, sweep.opts, sweep.plan.disk_table)
    most = sum(entry_most(e, terms.max_points, terms.passes) for e in entries)
    stored = {e.label: len(stored_pairs(sweep, e)) for e in entries}
    sweep.completed = sum(stored.values())
    sweep.bar.grow(max(most, sweep.completed) - sweep.bar.total)
    record: dict[str, Any] = {}
    for entry in entries:
        step = _run_entry(sweep, entry, AdaptiveChooser(entry.candidates, terms))
        record[entry.label] = entry_record(entry, stored_pairs(sweep, entry), step)
        keep_record(sweep, record)
        if step.stopped == STOP_TIME:
            for later in entries[entries.index(entry) + 1:]:
                record[later.label] = entry_record(later, stored_pairs(sweep, later), Step(
                    None, "the time limit came first: the same command with --resume goes on", None, STOP_TIME))
            keep_record(sweep, record)
            break
    sweep.summary["adaptive"] = record


def _run_entry(sweep: SweepRun, entry: Entry, chooser: AdaptiveChooser) -> Step:
    """Measure the chooser's shapes until it stops or the slice has no time left; the last step."""
    while True:
        step = chooser.step(stored_pairs(sweep, entry))
        if step.point is None:
            sweep.bar.note(f"{entry.label}: adaptive sweep stopped ({step.stopped}): {step.why}")
            return step
        sweep.bar.note(f"{entry.label}: next {step.point.label()}: {step.why}")
        sweep.visit(step.point)
        if sweep.left or step.point.key not in sweep.store.point_keys(sweep.sweep_id):
            return Step(None, "the time limit came before the next point: the same command with --resume goes on",
                        step.answer, STOP_TIME)


def entry_record(entry: Entry, measured: list[tuple[str, Any]], step: Step) -> dict[str, Any]:
    """What the report shows of an entry measured adaptively: the shapes measured (with how many
    measurements each) and predicted, the grid's size, and why the sweep stopped."""
    counts = shape_counts(measured)
    shapes = {c.key: c for c in entry.candidates}
    return {
        "workload": entry.workload,
        "settings": entry.settings,
        "grid_shapes": len(entry.candidates),
        "points": len(measured),
        "measured": [{"shape": _shape_label(shapes[k]), "measurements": n} for k, n in counts.items() if k in shapes],
        "predicted": [_shape_label(c) for c in entry.candidates if c.key not in counts],
        "stopped": step.stopped,
        "why": step.why,
        "answer": None if step.answer is None else step.answer.as_dict(),
    }


def _shape_label(point: PlannedPoint) -> str:
    return point.shape.label() + (" (GPU ceiling)" if point.ceiling else "")


def keep_record(sweep: SweepRun, record: dict[str, Any]) -> None:
    """Store the adaptive record in the sweep's calibration record (`SweepRun.keep`)."""
    sweep.keep(RECORD_KEY, record)
