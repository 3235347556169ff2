"""One sweep's run on this host, as its parts share it: the opened store and sweep, the points to
measure and those stored, the running counts, the progress bar and the summary handed back; how a
point is measured and committed, and the time limit of a slice (`--max-time`).

`sizer.sweep.execute` opens it and drives it; the adaptive loop (`adaptive_run`) and the parallel
runner (`parallel`) measure through it."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from sizer.console import styled
from sizer.errors import SizerError
from sizer.points import USABLE_STATUSES
from sizer.probe import probe_host
from sizer.runner import PointRun
from sizer.shapes import PlannedPoint
from sizer.store import Store, host_fingerprint
from sizer.sweep.calibration import calibrate, calibration_note, calibration_of_host
from sizer.sweep.data import Dataset, prepare_datasets
from sizer.sweep.defaults import host_speed_entry_s
from sizer.sweep.fingerprint import sweep_fingerprint
from sizer.sweep.measure import keep_steadier, measure_point, wants_repeat
from sizer.sweep.outputs import about_minutes, point_summary, stored_point_summary
from sizer.sweep.placement import Place
from sizer.sweep.plan import CALIBRATION_WORKLOAD, SweepOptions, SweepPlan
from sizer.sweep.progress import SweepProgress
from sizer.sweep.refine import refine_points
from sizer.sweep.signals import check_stop
from sizer.sweep.timeline import HostSpeed, describe, start_spread

OnPoint = Callable[[dict[str, Any]], None]
# How a run measures a list of points besides one after another (`--parallel`: side by side).
MeasureMany = Callable[[list[PlannedPoint]], None]


class PointFeed(Protocol):
    """Points given one at a time as they are wanted (an adaptive sweep's: each may depend on the
    measurements before it): `next` is asked whenever a slot is free, with the points in flight;
    None means none now (a later call, once one of those has ended, may give one). `candidates`:
    every point it may give (the datasets and slot copies they read are made ready for them)."""

    def next(self, in_flight: Sequence[PlannedPoint]) -> PlannedPoint | None: ...

    def candidates(self) -> list[PlannedPoint]: ...


# How a run measures the points of a feed besides one after another (`--parallel`: side by side).
FeedMany = Callable[[PointFeed], None]


# ---------------------------------------------------------------- the host
def host_info(plan: SweepPlan) -> dict[str, Any]:
    """What the store records of this host: the probe's description, its identity and the limit backend."""
    info = dict(probe_host(str(plan.data_dir)))
    cpu, gpu = info.get("cpu"), info.get("gpu")
    info.setdefault("cpu_model", cpu.get("model", "") if isinstance(cpu, dict) else "")
    info.setdefault("threads", plan.cpus.threads)
    info.setdefault("gpus", [d.get("name") for d in gpu.get("devices", [])] if isinstance(gpu, dict) else [])
    try:
        info.setdefault("machine_id", Path("/etc/machine-id").read_text().strip() or None)
    except OSError:
        info.setdefault("machine_id", None)
    info["limit_backend"] = plan.backend.name
    info["limit_backend_info"] = dataclasses.asdict(plan.backend.info())
    return info


def check_same_host(store: Store, sweep_id: int, host_id: int, host: dict[str, Any], path: Path) -> None:
    """A sweep is one host's: points of two machines (even of one kind: their per-vCPU calibrations
    differed by up to 50% on one cloud's GPU hosts) do not belong in one fit."""
    found = store.sweep_host(sweep_id)
    if found is None or found[0] == host_id or host_fingerprint(found[1]) == host_fingerprint(host):
        return
    then = found[1]
    raise SizerError(
        f"sweep {sweep_id} in {path} was measured on host {then.get('hostname')!r} ({then.get('cpu_model')}), "
        f"this is {host.get('hostname')!r} ({host.get('cpu_model')}): a sweep cannot span two machines; "
        "run without --resume to start a new sweep in this store, or give another --store"
    )


def past_deadline(max_seconds: float | None, started: float, walls: list[float], estimate: float) -> bool:
    """Would the next point end past the slice's limit? Its length: the longest point so far in
    this run, else the plan's estimate."""
    if max_seconds is None:
        return False
    expected = max(walls) if walls else estimate
    return time.monotonic() - started + expected > max_seconds


# ---------------------------------------------------------------- the sweep
class SweepRun:
    """One sweep's measuring in its opened store: the points to measure, the ones stored, the
    running counts and the summary the sweep hands back."""
    def __init__(self, plan: SweepPlan, opts: SweepOptions, store: Store, summary: dict[str, Any], started: float,
                 on_point: OnPoint | None, progress: bool = False):
        self.plan, self.opts, self.store, self.summary = plan, opts, store, summary
        self.started = started  # the slice's clock (--max-time)
        self.on_point = on_point
        self.host_id = self.sweep_id = 0
        self.done: set[str] = set()  # keys of the points stored in this sweep
        self.stored: dict[str, Any] = {}
        self.todo: list[PlannedPoint] = []
        self.datasets: dict[str, Dataset] = {}
        self.bar = SweepProgress(0, 0.0, enabled=progress)  # until measuring starts: notes only
        self.completed = 0
        self.left = 0  # points past the time limit
        self.walls: list[float] = []
        self.host_speed = HostSpeed(plan, store, 0, time.time())  # the sweep's own once it is open
        self.finished = False  # the sweep was finished before this run
        self.measure_many: MeasureMany | None = None  # --parallel: points side by side (`sizer.sweep.parallel`)
        self.measure_pairs: Callable[[], None] | None = None  # --colocate: after the grid (`sizer.sweep.colocate`)
        self.host: dict[str, Any] = {}  # the host record (`host_info`) once the sweep is open
        self.feed_many: FeedMany | None = None  # --parallel: a feed's points side by side

    def open(self, host: dict[str, Any]) -> None:
        """Start the sweep, or with --resume take up the newest one of the same plan on this host."""
        plan, store = self.plan, self.store
        self.host = host
        self.host_id = store.upsert_host(host)
        sweep_id = store.resumable_sweep(plan.config) if self.opts.resume else None
        resumed = sweep_id is not None
        if sweep_id is not None:
            check_same_host(store, sweep_id, self.host_id, host, plan.store)
        else:
            sweep_id = store.start_sweep(self.host_id, self.opts.command, plan.config)
        self.sweep_id = sweep_id
        sweep_row = next(s for s in store.sweeps() if s.id == sweep_id)
        self.host_speed = HostSpeed(plan, store, sweep_id, sweep_row.started)
        self.finished = sweep_row.finished is not None
        self.done = store.point_keys(sweep_id)
        self.summary.update({"sweep_id": sweep_id, "store": str(plan.store), "resumed": resumed})
        if self.opts.resume and not resumed:
            plan.notes.append("no earlier sweep with this plan in the store: starting a new one")
        self._count_todo()
        self.stored = {row["key"]: row for row in store.point_rows(sweep_id)}

    def _count_todo(self) -> None:
        self.todo = [p for p in self.plan.points if p.key not in self.done]
        self.summary["skipped"] = len(self.plan.points) - len(self.todo)

    def _known_calibration(self) -> tuple[dict[str, Any], bool]:
        """(the sweep's calibration so far, whether it still has to be measured): a resumed sweep's
        own, else another sweep's of this host."""
        existing: dict[str, Any] = next((s.calibration for s in self.store.sweeps() if s.id == self.sweep_id), {})
        if existing or not self.opts.calibrate or CALIBRATION_WORKLOAD not in self.plan.classes:
            return existing, False
        reused = calibration_of_host(self.store, self.host_id, self.plan)
        if not reused:
            return existing, True
        self.store.set_calibration(self.sweep_id, reused)
        self.plan.notes.append(f"calibration taken from sweep {reused['from_sweep']} of this host (same CPUs)")
        return reused, False

    def prepare(self) -> None:
        """The datasets the points to measure read, and the calibration, measured where none is known."""
        plan = self.plan
        calibration, measure_calibration = self._known_calibration()
        self._choose_passes(calibration)
        self._say_plan()
        kinds = list(plan.datasets)
        if measure_calibration and plan.classes[CALIBRATION_WORKLOAD].dataset:
            kinds = sorted(set(kinds) | {plan.classes[CALIBRATION_WORKLOAD].dataset})
        if self.todo or measure_calibration:
            if kinds:
                self.bar.note(f"datasets: {', '.join(kinds)} under {plan.data_dir} (generated once, then reused)")
            self.datasets = prepare_datasets(plan.dataset_needs(kinds))
        self.summary["datasets"] = {k: {"path": str(d.path), "bytes": d.nbytes} for k, d in self.datasets.items()}
        if measure_calibration:
            self.bar.note(calibration_note(plan))
            calibration = calibrate(plan, self.datasets, self.host_speed.at_s())
            fingerprint = sweep_fingerprint(calibration, self.host, self.sweep_id)
            if fingerprint is not None:  # the host's fingerprint, kept with its calibration (`sizer.fingerprint`)
                calibration["fingerprint"] = fingerprint
            self.store.set_calibration(self.sweep_id, calibration)
        self.summary["calibration"] = calibration
        self._follow_host_speed(calibration, measure_calibration)

    def _say_plan(self) -> None:
        """The plan and its estimate, before anything starts."""
        plan = self.plan
        passes = f"{plan.passes} pass{'es' if plan.passes > 1 else ''}"
        passes += f", then --refine {plan.refine}" if plan.refine else ""
        passes += f" ({plan.passes_reason})" if plan.passes_reason else ""
        count = f"{len(plan.points)} point{'s' if len(plan.points) != 1 else ''}"
        self.bar.note(f"plan: {count} in {passes}, {len(self.todo)} to measure; the whole sweep "
                      f"{about_minutes(plan.estimate_s(self.opts.calibrate))}")

    def _follow_host_speed(self, calibration: dict[str, Any], measured_now: bool) -> None:
        """This run's start entry of the host's speed (the calibration just measured holds it), where
        it has points to measure; then the passes it chooses."""
        if measured_now or self.todo or (self.plan.refine and not self.finished):
            entry = self.host_speed.begin(calibration, measured_now)
            if entry is not None:
                self.bar.note(describe(entry))
        if self._choose_passes(calibration) and self.plan.datasets and not self.datasets:
            self.datasets = prepare_datasets(self.plan.dataset_needs())  # points gained after the datasets were left out

    def _choose_passes(self, calibration: dict[str, Any]) -> bool:
        """A plan whose start calibration chooses its passes (defaults.choose_passes) takes more
        where the sweep's first entry spread too far (a resumed sweep chooses again from it); whether
        it did now."""
        if not self.plan.apply_start_spread(start_spread(calibration)):
            return False
        self._count_todo()
        self.plan.notes.append(f"{self.plan.passes} passes and --refine {self.plan.refine}: {self.plan.passes_reason}")
        self.bar.note(self.plan.notes[-1])
        return True

    def _measure_host_speed(self, then_s: float) -> None:
        """An entry of the host's speed, where the slice has time for it and `then_s` more."""
        if past_deadline(self.opts.max_seconds, self.started, [], host_speed_entry_s() + then_s):
            return
        entry = self.host_speed.measure()
        if entry is not None:
            self.bar.note(describe(entry))

    def measure_all(self, strategy: Callable[[SweepRun], None] | None = None) -> None:
        """Every point of the plan (`strategy`: how else to choose them, `--strategy adaptive`'s loop),
        then with --refine the shapes its models predict worst."""
        estimate = self.plan.estimate_point_s(self.todo[0]) if self.todo else 0.0
        if self.todo:
            self.bar.note(f"measuring {len(self.todo)} of {len(self.plan.points)} points")
        with SweepProgress(len(self.plan.points), estimate, enabled=self.bar.enabled) as self.bar:
            self.completed = self.summary["skipped"]
            if strategy is not None:
                strategy(self)
            else:
                self.measure(self.plan.points)
            if self.plan.refine and not self.left:
                self.refine()
            if self.measure_pairs is not None:
                self.measure_pairs()
            if self.host_speed.enabled and self.host_speed.points_since:
                self._measure_host_speed(0.0)  # the end of this run

    def measure(self, points: list[PlannedPoint]) -> None:
        """Each point in turn (`visit`), or with --parallel up to one one-GPU point per slot at once
        (`sizer.sweep.parallel`)."""
        if self.measure_many is None:
            for point in points:
                self.visit(point)
        else:
            self.measure_many(points)

    def measure_fed(self, feed: PointFeed) -> None:
        """The points `feed` gives, each in turn, or with --parallel side by side as slots free up."""
        if self.feed_many is not None:
            self.feed_many(feed)
            return
        while (point := feed.next([])) is not None:
            self.visit(point)

    def refine(self) -> None:
        """`--refine`: measure once more the shapes chosen from the passes' measurements alone, so a
        resumed sweep chooses the same."""
        chosen = refine_points(self.plan, self.store.results(self.sweep_id))
        self.summary["refine"] = [{"key": point.key, "held_out_error": round(err, 4)} for point, err in chosen]
        todo = [(point, err) for point, err in chosen if point.key not in self.done]
        self.summary["skipped"] += len(chosen) - len(todo)
        self.completed += len(chosen) - len(todo)
        self.bar.grow(len(chosen))
        if todo:
            self.bar.note("refine: measuring again " + ", ".join(
                f"{point.label()} (held out {err:.0%})" for point, err in todo))
        self.measure([point for point, _ in chosen])

    def visit(self, point: PlannedPoint) -> None:
        """Measure one point and commit it, or report it as stored, or count it as left."""
        if not self.begin(point):
            return
        self.bar.start(self.completed + 1, point.label(), self.completed)
        t0 = time.monotonic()
        self.commit(point, self.measure_steadily(point, t0), t0)

    def begin(self, point: PlannedPoint) -> bool:
        """Whether to measure `point` now: a stored one is reported as stored, and one the slice has
        no time for is counted as left; an entry of the host's speed that is due is measured first."""
        if point.key in self.done:
            self.summary["points"].append(stored_point_summary(point, self.stored.get(point.key)))
            return False
        check_stop()
        if not self.has_time_for(point):
            return False
        if self.host_speed.due():
            self._measure_host_speed(self.plan.estimate_point_s(point))
        return True

    def has_time_for(self, point: PlannedPoint) -> bool:
        """Whether the slice has time for `point`; once it has not, every later point is left."""
        if self.left or past_deadline(self.opts.max_seconds, self.started, self.walls, self.plan.estimate_point_s(point)):
            self.left += 1
            return False
        return True

    def commit(self, point: PlannedPoint, run: PointRun, t0: float, key: str | None = None,
               label: str | None = None) -> dict[str, Any]:
        """Store a measured point (under `key`, default its own) and count it; its summary row."""
        key = key or point.key
        self.store.add_point(self.sweep_id, key, point.shape.as_dict(), run.result, run.enforced, run.started)
        return self._count(point, run, t0, key, label)

    def commit_together(self, measured: list[tuple[PlannedPoint, PointRun, str, str]], t0: float) -> list[dict[str, Any]]:
        """Store points measured together, each (point, run, key, label), in one transaction (a
        pair's two jobs: a kill stores both or neither), then count each; their summary rows."""
        self.store.add_points(self.sweep_id, [(key, point.shape.as_dict(), run.result, run.enforced, run.started)
                                              for point, run, key, _ in measured])
        return [self._count(point, run, t0, key, label) for point, run, key, label in measured]

    def _count(self, point: PlannedPoint, run: PointRun, t0: float, key: str, label: str | None) -> dict[str, Any]:
        """A stored point counted: the progress bar, the summary and the caller's `on_point`."""
        self.done.add(key)
        self.host_speed.point_done()
        self.completed += 1
        elapsed = time.monotonic() - t0
        self.walls.append(elapsed)
        row = point_summary(point, run.result, run.wall_s, skipped=False)
        row["key"] = key
        if isinstance(run.result.extra.get("parallel"), dict):
            row["parallel"] = run.result.extra["parallel"]
        if "alone" in run.result.extra:  # an interference check's measurement alone
            row["alone"] = True
        if isinstance(run.result.extra.get("colocated"), dict):  # a pair's job, beside its partner or alone
            row["colocated"] = {k: run.result.extra["colocated"][k] for k in ("job", "partner", "share_of")}
        label = label or point.label()
        self.bar.finish(self.completed, elapsed, row, label=label)
        self.summary["points"].append(row)
        if self.on_point is not None:
            self.on_point(row)
        if run.result.status not in USABLE_STATUSES and self.bar.live:  # a plain line says it already
            self.bar.note(styled((f"{label}: {run.result.status}", "yellow"), f" {row['error']}"))
        return row

    def measure_steadily(self, point: PlannedPoint, t0: float, place: Place | None = None) -> PointRun:
        """One measurement, and with --repeat-noisy a second one where the first's windows spread
        too far and the slice has time for it. `place`: a parallel sweep's slot (its CPUs, GPU and
        datasets). It writes nothing to the store, so a parallel sweep's worker threads run it."""
        datasets = self.datasets if place is None else place.datasets
        cpus, gpus = (None, None) if place is None else (place.cpus, place.gpus)
        run = measure_point(self.plan, point, datasets, cpus=cpus, gpus=gpus)
        if (wants_repeat(run.result, self.opts.repeat_spread)
                and not past_deadline(self.opts.max_seconds, self.started, [time.monotonic() - t0], 0.0)):
            self.bar.note(f"{point.label()}: windows spread {run.result.spread:.0%}, measuring it again")
            run = keep_steadier(run, measure_point(self.plan, point, datasets, cpus=cpus, gpus=gpus))
        return run

    def keep(self, key: str, value: Any) -> None:
        """Keep `value` under `key` in the sweep's calibration record, where the host's speed entries
        go too and the report finds it (the dict those entries are written from gets it as well, so a
        later entry keeps it); None removes the key."""
        current = next((s.calibration for s in self.store.sweeps() if s.id == self.sweep_id), None) or {}
        if value is None and key not in current:
            return
        for record in (current, self.host_speed.calibration):
            if (record is not current and not record) or (value is None and key not in record):
                continue
            if value is None:
                del record[key]
            else:
                record[key] = value
        self.store.set_calibration(self.sweep_id, current)

    def finish(self) -> None:
        """Close the sweep, unless a slice left points to go (`complete` says which in the summary)."""
        self.summary["sweep_ids"] = [self.sweep_id]
        self.summary["complete"] = not self.left
        if self.left:
            self.summary["left"] = self.left
            self.plan.notes.append(
                f"stopped at the time limit with {self.left} point(s) to go: the same command with --resume goes on")
        else:
            self.store.finish_sweep(self.sweep_id)


