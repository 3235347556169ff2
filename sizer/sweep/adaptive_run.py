"""`sizer sweep --strategy adaptive`: the adaptive searches (`sizer.sweep.adaptive`) over a sweep's run.

Every workload entry of the plan has a search; together they feed the sweep's measuring one point
at a time (`AdaptiveFeed`): a free slot (one, or K with `--parallel K`) takes the next point of the
search with the fewest measurements, asked given what the store holds of its entry and which of its
points are in flight. Each point is measured through the sweep's own `visit` or parallel runner
(limits, commit point by point, the time limit of `--max-time`), until every search stops or the
slice has no time for the next point. What stopped each entry is kept in the sweep's record
(`record`), where the report finds it: the shapes measured and how often, the shapes the model
predicts, and why it stopped.

The chooser sees only the stored points, in the order they were stored: a killed sweep resumed with
`--resume` makes the same choices.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

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
    """Every entry's search on an opened, prepared sweep (`sizer.sweep.state.SweepRun`), fed point by
    point to its measuring (`AdaptiveFeed`): one at a time, or with --parallel K in K slots at once."""
    entries = plan_entries(sweep.plan.points)
    terms = adaptive_terms(sweep.store, sweep.sweep_id, sweep.opts, sweep.plan.disk_table)
    feed = AdaptiveFeed(sweep, [Search(sweep, e, AdaptiveChooser(e.candidates, terms)) for e in entries])
    most = sum(entry_most(e, terms.max_points, terms.passes) for e in entries)
    sweep.completed = sum(len(search.stored()) for search in feed.searches)
    sweep.bar.grow(max(most, sweep.completed) - sweep.bar.total)
    sweep.measure_fed(feed)
    feed.finish()
    sweep.summary["adaptive"] = feed.record


class Search:
    """One entry's search in a sweep: its chooser, and its last step once it stopped."""

    def __init__(self, sweep: SweepRun, entry: Entry, chooser: AdaptiveChooser):
        self.sweep, self.entry, self.chooser = sweep, entry, chooser
        self.bases = {c.key for c in entry.candidates}
        self.last: Step | None = None
        self._stored: tuple[int, list[tuple[str, Point]]] = (-1, [])

    def stored(self) -> list[tuple[str, Point]]:
        """The entry's stored (key, point) pairs in the order they were stored (read again only once
        the sweep has stored more)."""
        if self._stored[0] != len(self.sweep.done):
            self._stored = (len(self.sweep.done), stored_pairs(self.sweep, self.entry))
        return self._stored[1]

    def owns(self, point: PlannedPoint) -> bool:
        return shape_key(point.key) in self.bases


class AdaptiveFeed:
    """The entries' searches as one feed of points (`sizer.sweep.state.PointFeed`). A free slot takes
    the next point of the search that most needs one: of those with a point to measure now, the one
    with the fewest measurements stored and in flight (the first in plan order on a tie), so K slots
    run K searches' points at once. Each search keeps its own choices (`AdaptiveChooser.step`: at most
    one choice that depends on its measurements in flight), budget and resume."""

    def __init__(self, sweep: SweepRun, searches: list[Search]):
        self.sweep, self.searches = sweep, searches
        self.record: dict[str, Any] = {}

    def candidates(self) -> list[PlannedPoint]:
        return [c for search in self.searches if search.last is None for c in search.entry.candidates]

    def next(self, in_flight: Sequence[PlannedPoint]) -> PlannedPoint | None:
        if self.sweep.left:  # the slice has no time for more: every search still going stops here
            for search in self.searches:
                if search.last is None and not any(search.owns(p) for p in in_flight):
                    self._stop(search, Step(None, "the time limit came first: the same command with --resume goes on",
                                            search.chooser.answer(search.stored()), STOP_TIME))
            return None
        going = [(len(search.stored()) + sum(search.owns(p) for p in in_flight), i, search)
                 for i, search in enumerate(self.searches) if search.last is None]
        for _, _, search in sorted(going, key=lambda t: t[:2]):
            mine = [p.key for p in in_flight if search.owns(p)]
            step = search.chooser.step(search.stored(), mine)
            if step.point is not None:
                self.sweep.bar.note(f"{search.entry.label}: next {step.point.label()}: {step.why}")
                return step.point
            if not step.waiting:
                self._stop(search, step)
        return None

    def _stop(self, search: Search, step: Step) -> None:
        search.last = step
        self.sweep.bar.note(f"{search.entry.label}: adaptive sweep stopped ({step.stopped}): {step.why}")
        self._keep()

    def finish(self) -> None:
        """Every search's record kept, a search the measuring left without a stop (a time limit met
        with its points in flight) as stopped by the time limit."""
        for search in self.searches:
            if search.last is None:
                search.last = Step(None, "the time limit came first: the same command with --resume goes on",
                                   search.chooser.answer(search.stored()), STOP_TIME)
        self._keep()

    def _keep(self) -> None:
        for search in self.searches:
            if search.last is not None:
                self.record[search.entry.label] = entry_record(search.entry, search.stored(), search.last)
        keep_record(self.sweep, self.record)


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
