"""`sizer sweep --parallel K`: up to K one-GPU points measured at once, each in a slot of its own.

A slot (`sizer.sweep.placement`) is one GPU with cores no other slot has. A point in it gets its
vCPUs from those cores, its own limit group (memory limit, disk throttle) and its own copy of the
dataset: the page cache is charged to the group that first reads a page, so points reading one copy
would serve each other from cache, and evicting one point's dataset would make another's cold.
Slot 0 reads the dataset itself, slot i a copy beside the data folder (`copy_target`). A point of
several GPUs runs with nothing beside it, as do the calibration and the host's speed entries.

Worker threads measure; the main thread alone writes to the store, committing each point as it
ends. Ctrl-C or SIGTERM end every point in flight (each removes its group); committed points stay.

The interference check: a few CPU-bound shapes (`--interference N`: the largest vCPU counts on the
fastest disk at the largest RAM, `choose_checks`) are measured in parallel as the first points, with
every slot busy, and, once nothing else runs, alone in the same slot. The report gives the
difference, and the load factor (`sizer.model.load`) judges instances of several GPUs.
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Mapping

from sizer.diskclasses import DiskClass
from sizer.errors import SizerError
from sizer.interference import parallel_context
from sizer.points import USABLE_STATUSES
from sizer.runner import PointRun
from sizer.shapes import PlannedPoint
from sizer.store import Store
from sizer.sweep.data import prepare_datasets
from sizer.sweep.outputs import about_minutes
from sizer.sweep.placement import Place, Slot, check_slots_fit, plan_slots, read_topology
from sizer.sweep.plan import SweepOptions, SweepPlan
from sizer.sweep.signals import STOP, check_stop
from sizer.sweep.slot_copies import DatasetCopy, check_copy_space, make_copies, plan_copies, reads, slot_kinds
from sizer.sweep.state import PointFeed, SweepRun
from sizer.units import GIB, format_bytes

# Serial until a multi-GPU host has measured what points beside each other cost
# (docs/PERFORMANCE.md, "Parallel sweeps"): the one number to change once it has.
# Without --parallel, a sweep measures on at most this many GPUs at once (where its shapes fit).
# Side by side against alone, the same shapes differed by +0.2% median, +1.4% max on a 2-GPU H100
# host, but by -7.2% median, -12.0% max on a 4-GPU one: more than the 5% tolerance, so parallel
# sweeps are asked for (--parallel K), never assumed, and carry their interference check.
DEFAULT_PARALLEL = 1
DEFAULT_INTERFERENCE = 2  # shapes a parallel sweep measures alone as well
POLL_S = 0.5  # how often the main thread looks for a stop while points run


def default_parallel(gpus: int) -> int:
    """The most points a sweep measures at once without --parallel, on a host with `gpus` GPUs
    (fewer where the plan's shapes do not fit that many slots: `plan_parallel`)."""
    return max(1, min(gpus, DEFAULT_PARALLEL))


def alone_key(key: str) -> str:
    """The key of an interference check's measurement alone, beside its shape's own."""
    return f"{key}#alone"


# ---------------------------------------------------------------- the plan: slots, copies, checks
@dataclass
class ParallelSetup:
    """A parallel sweep's slots, its dataset copies and the planned points also measured alone (or,
    where points are fed as slots free up, how many of the first started)."""
    slots: list[Slot]
    copies: list[DatasetCopy]
    checks: list[str]
    notes: list[str] = field(default_factory=list)
    copy_seconds: float = 0.0  # spent making the copies in this run
    copy_bytes: int = 0  # written by the copies made in this run
    checks_as_started: int = 0  # fed points (an adaptive sweep's): the first this many started are checked
    estimated_seconds: float = 0.0  # the whole sweep's, as `estimate_s` gives it

    def estimate_s(self, plan: SweepPlan, calibrate: bool) -> float:
        """The plan's estimate with its one-GPU points shared among the slots, and the checks'
        measurements alone on top."""
        one_gpu = sum(plan.estimate_point_s(p) for p in plan.points if p.shape.gpus == 1)
        alone = sum(plan.estimate_point_s(p) for p in plan.points if p.key in self.checks)
        return plan.estimate_s(calibrate) - one_gpu + one_gpu / len(self.slots) + alone

    def outline(self) -> dict[str, Any]:
        return {
            "slots": [slot.as_dict() for slot in self.slots],
            "interference_checks": list(self.checks),
            "dataset_copies": [{"dataset": c.kind, "slot": c.slot, "path": str(c.target), "bytes_to_copy": c.missing_bytes}
                               for c in self.copies],
            "copy_seconds": round(self.copy_seconds, 1),
            "copy_bytes": self.copy_bytes,
            "estimated_seconds": round(self.estimated_seconds, 1),
        }


def plan_parallel(plan: SweepPlan, opts: SweepOptions) -> ParallelSetup | None:
    """The slots of a sweep measuring several points at once, everything checked before any work
    (a SizerError names the first problem); None for a serial sweep."""
    if opts.parallel is not None and opts.parallel < 1:
        raise SizerError(f"--parallel wants 1 or more points at once, got {opts.parallel}")
    if opts.interference is not None and opts.interference < 0:
        raise SizerError(f"--interference wants 0 or more shapes, got {opts.interference}")
    one_gpu = [p for p in _all_points(plan) if p.shape.gpus == 1]
    if opts.parallel is not None:
        count = plan.slots or opts.parallel  # the default grid may take fewer, wider slots (defaults.parallel_grid)
    else:  # an adaptive sweep chooses each shape from the ones before it: one at a time
        count = 1 if opts.strategy == "adaptive" else _fitting_default(plan, one_gpu)
    if count == 1 or not one_gpu:
        if count > 1:
            plan.notes.append(f"--parallel {count}: the plan has no one-GPU point; every point runs alone")
        elif opts.interference:
            plan.notes.append("--interference: the sweep measures one point at a time, so nothing to compare")
        return None
    slots = plan_slots(read_topology(plan.cpus), count)
    check_slots_fit(slots, max(p.shape.vcpus for p in one_gpu), plan.cpus.threads)
    _check_ram(count, max(p.shape.ram_bytes for p in one_gpu), plan.host_ram)
    copies = plan_copies(plan, slots)
    check_copy_space(plan, copies, count)
    wanted = DEFAULT_INTERFERENCE if opts.interference is None else opts.interference
    if opts.strategy == "adaptive":  # its points are chosen as it goes: the first ones started are checked
        setup = ParallelSetup(slots, copies, [], checks_as_started=wanted)
    else:
        setup = ParallelSetup(slots, copies, choose_checks(plan.points, wanted, plan.disk_table))
    copy_bytes = sum(c.missing_bytes for c in copies)
    setup.estimated_seconds = setup.estimate_s(plan, opts.calibrate)
    checked = len(setup.checks) or setup.checks_as_started
    setup.notes.append(f"--parallel {count}: " + "; ".join(slot.describe() for slot in slots) + "; the whole sweep "
                       f"{about_minutes(setup.estimated_seconds)}, {checked} shape(s) measured alone as well (--interference)")
    if copies:
        which = ", ".join(f"{c.kind} to slot {c.slot}" for c in copies)
        setup.notes.append(f"dataset copies for the slots that read them ({which}; made once, then reused): "
                           f"at most {format_bytes(copy_bytes)} to copy into "
                           f"{', '.join(sorted({str(c.target.parent) for c in copies}))}, before the points that read them")
    return setup


def _fitting_default(plan: SweepPlan, one_gpu: list[PlannedPoint]) -> int:
    """Without --parallel: the most slots, up to `default_parallel`, whose CPUs, RAM and disk hold
    the plan's one-GPU shapes and the dataset copies; 1 where none beyond one does."""
    if DEFAULT_PARALLEL <= 1 or not one_gpu:  # serial by default: no NVML or sysfs reads for nothing
        return 1
    topology = read_topology(plan.cpus)
    for count in range(default_parallel(len(topology.gpus)), 1, -1):
        try:
            slots = plan_slots(topology, count)
            check_slots_fit(slots, max(p.shape.vcpus for p in one_gpu), plan.cpus.threads)
            _check_ram(count, max(p.shape.ram_bytes for p in one_gpu), plan.host_ram)
            check_copy_space(plan, plan_copies(plan, slots), count)
        except SizerError:
            continue
        return count
    return 1


def _all_points(plan: SweepPlan) -> list[PlannedPoint]:
    """The plan's points, and those it takes if its start calibration spreads."""
    return plan.points + (plan.on_spread[0] if plan.on_spread is not None else [])


def _check_ram(count: int, ram_bytes: int, host_ram: int) -> None:
    if count * ram_bytes > host_ram:
        raise SizerError(f"--parallel {count}: {count} points of {ram_bytes / GIB:g} GiB RAM at once need "
                         f"{count * ram_bytes / GIB:g} GiB, this host has {host_ram / GIB:.1f}: give a smaller "
                         "--parallel or smaller --ram")


def choose_checks(points: list[PlannedPoint], wanted: int, disk_table: Mapping[str, DiskClass]) -> list[str]:
    """The shapes measured alone as well: CPU-bound ones only, which show what the other slots take
    (a shape capped by its disk throttle or by the GPU reads the same beside others and alone). Of
    each workload entry's one-GPU points of the first pass, input not synthetic (a ceiling is the
    GPU's) and not decoded on the GPU, those on the fastest disk class at the entry's largest RAM,
    the largest vCPU counts first; the entries take turns, in the order they first come in the plan."""
    entries: dict[str, list[PlannedPoint]] = {}
    for p in points:
        if p.shape.gpus != 1 or p.pass_no != 1 or p.ceiling or str(p.config.get("decode", "cpu")) == "gpu":
            continue
        entries.setdefault(f"{p.workload}:{sorted(p.config.items())}", []).append(p)
    queues = []
    for group in entries.values():
        fastest = min((p.shape.disk_class for p in group), key=lambda d: _disk_speed_rank(d, disk_table))
        on_fastest = [p for p in group if p.shape.disk_class == fastest]
        roomiest = max(p.shape.ram_gib for p in on_fastest)
        queues.append(sorted((p for p in on_fastest if p.shape.ram_gib == roomiest), key=lambda p: -p.shape.vcpus))
    chosen: list[str] = []
    while len(chosen) < wanted and any(queues):
        for queue in queues:
            if queue and len(chosen) < wanted:
                chosen.append(queue.pop(0).key)
    return chosen


def _disk_speed_rank(name: str, disk_table: Mapping[str, DiskClass]) -> tuple[float, float]:
    """Fastest first: an unthrottled class, then by read bandwidth and IOPS, highest first."""
    disk = disk_table.get(name)
    if disk is None:
        return (math.inf, math.inf)
    bw = -math.inf if disk.read_mbps is None else -float(disk.read_mbps)
    iops = -math.inf if disk.read_iops is None else -float(disk.read_iops)
    return (bw, iops)


# ---------------------------------------------------------------- measuring
@dataclass
class _Flight:
    point: PlannedPoint
    slot: Slot
    t0: float


class ParallelRunner:
    """Measures a sweep's points up to one per slot at once, committing each as it ends."""
    def __init__(self, sweep: SweepRun, setup: ParallelSetup):
        self.sweep, self.setup = sweep, setup
        self.free = list(setup.slots)
        self.flying: dict[Future[PointRun], _Flight] = {}
        self.alone_due: list[tuple[PlannedPoint, Slot]] = []
        self.places: dict[int, Place] = {}
        self.checks = set(setup.checks)
        self.held: PlannedPoint | None = None  # a fed point waiting for a slot that can take it

    def run(self, points: list[PlannedPoint]) -> None:
        """Measure and commit every point not stored yet: each one-GPU point in the first free slot,
        a point of several GPUs (and an entry of the host's speed) with nothing else running."""
        self.sweep.bar.slots = len(self.setup.slots)
        self._prepare_places(points)
        queue = self._order(points)
        self._resume_checks()
        with ThreadPoolExecutor(len(self.setup.slots), thread_name_prefix="sizer-slot") as pool:
            try:
                while queue or self.flying or self.alone_due:
                    self._dispatch(pool, queue)
                    self._collect()
            except BaseException:
                STOP.set()  # every point in flight ends now, removing its group, before the pool closes
                raise

    def run_fed(self, feed: PointFeed) -> None:
        """Measure and commit the points `feed` gives as slots free up (an adaptive sweep's: each
        point may depend on the ones before it), each one-GPU point in a free slot holding its
        dataset, until the feed has none and nothing is in flight."""
        self.sweep.bar.slots = len(self.setup.slots)
        self._prepare_places(feed.candidates())
        self._resume_checks()
        with ThreadPoolExecutor(len(self.setup.slots), thread_name_prefix="sizer-slot") as pool:
            try:
                while True:
                    self._dispatch_fed(pool, feed)
                    if not self.flying and not self.alone_due:
                        return
                    self._collect()
            except BaseException:
                STOP.set()  # every point in flight ends now, removing its group, before the pool closes
                raise

    def _dispatch_fed(self, pool: ThreadPoolExecutor, feed: PointFeed) -> None:
        """Start what may start now: an alone measurement or a due entry of the host's speed once
        nothing runs, else a point of the feed in each free slot holding its dataset; a point no free
        slot can take waits in `held`, before the feed is asked again."""
        sweep = self.sweep
        while True:
            check_stop()
            if self.alone_due:
                if self.flying:
                    return
                self._measure_alone(*self.alone_due.pop(0))
                continue
            if not self.free or (sweep.host_speed.due() and self.flying):
                return
            point = self.held or feed.next([f.point for f in self.flying.values()])
            self.held = None
            if point is None:
                return
            if point.shape.gpus > 1:
                if self.flying:
                    self.held = point
                    return
                sweep.visit(point)
                continue
            kind = reads(sweep.plan, point)
            slot = next((s for s in self.free if not kind or kind in self.places[s.index].datasets), None)
            if slot is None:
                self.held = point
                return
            if not sweep.begin(point):
                continue  # stored, or the slice has no time left (the feed sees `sweep.left`)
            if len(self.checks) < self.setup.checks_as_started and not point.ceiling:
                self.checks.add(point.key)
            self.free.remove(slot)
            self._start(pool, point, slot)

    def _prepare_places(self, points: list[PlannedPoint]) -> None:
        """Each slot's CPUs, GPU and datasets: the copies `points` (those not stored yet) will read,
        made now where they are not there yet (`slot_copies`), with nothing in flight."""
        sweep = self.sweep
        if not self.places:
            for note in self.setup.notes:
                sweep.bar.note(note)
        left = [p for p in points if p.key not in sweep.done and p.shape.gpus == 1]
        wanted = slot_kinds(sweep.plan, left, self.setup.slots)
        if any(wanted.values()) and not sweep.datasets:  # only alone measurements left: no point prepared them
            sweep.datasets = prepare_datasets(sweep.plan.dataset_needs())
        for slot in self.setup.slots:  # what a slot holds already stays: a later call may read it again
            held = self.places[slot.index].datasets if slot.index in self.places else {}
            wanted[slot.index] = tuple(sorted(set(wanted[slot.index]) | set(held)))
        datasets, cost = make_copies(sweep.datasets, wanted, sweep.plan.data_dir, sweep.bar.note)
        for slot in self.setup.slots:
            gpus = None if slot.gpu is None else (slot.gpu.index,)
            self.places[slot.index] = Place(slot.cpus, gpus, datasets[slot.index])
        self.setup.copy_seconds += cost.seconds
        self.setup.copy_bytes += cost.bytes

    def _order(self, points: list[PlannedPoint]) -> list[PlannedPoint]:
        """The interference checks first (they run beside other points), points of several GPUs last."""
        checks = [p for p in points if p.key in self.checks]
        return checks + [p for p in points if p.key not in self.checks and p.shape.gpus == 1] + [
            p for p in points if p.shape.gpus > 1]

    def _resume_checks(self) -> None:
        """Checks whose parallel measurement a sweep cut short stored without its one alone (a fed
        sweep's checks are the stored points marked as such)."""
        by_key = {p.key: p for p in self.sweep.plan.points}
        if self.setup.checks_as_started:
            self.checks |= {key for key, row in self.sweep.stored.items() if "#alone" not in key
                            and json.loads(row["result"]).get("extra", {}).get("interference_check")}
        for key in sorted(self.checks):
            row = self.sweep.stored.get(key)
            if row is None or alone_key(key) in self.sweep.done or row["status"] not in USABLE_STATUSES:
                continue
            mark = json.loads(row["result"]).get("extra", {}).get("parallel")
            if isinstance(mark, dict) and key in by_key:
                self._due_alone(by_key[key], self.setup.slots[int(mark.get("slot") or 0) % len(self.setup.slots)])

    def _due_alone(self, point: PlannedPoint, slot: Slot) -> None:
        self.alone_due.append((point, slot))
        self.sweep.bar.grow(1)

    def _dispatch(self, pool: ThreadPoolExecutor, queue: list[PlannedPoint]) -> None:
        """Start what may start now: stored points are reported, each free slot takes the next
        point; an alone measurement, a point of several GPUs or a due entry of the host's speed
        waits until nothing runs."""
        sweep = self.sweep
        while queue or self.alone_due:
            check_stop()
            if self.alone_due:
                if not self.flying:
                    self._measure_alone(*self.alone_due.pop(0))
                    continue
                return
            if queue[0].key in sweep.done:
                sweep.visit(queue.pop(0))  # reported as stored
                continue
            found = self._next_fit(queue)
            if found is None:
                return
            index, slot = found
            point = queue[index]
            if (point.shape.gpus > 1 or sweep.host_speed.due()) and self.flying:
                return
            queue.pop(index)
            if point.shape.gpus > 1:
                sweep.visit(point)
            elif sweep.begin(point):
                assert slot is not None
                self.free.remove(slot)
                self._start(pool, point, slot)

    def _next_fit(self, queue: list[PlannedPoint]) -> tuple[int, Slot | None] | None:
        """The first waiting point a free slot holds the dataset of, and that slot (None for a point
        of several GPUs, which runs alone); None where no free slot can take one."""
        for index, point in enumerate(queue):
            if point.shape.gpus > 1:
                return index, None
            kind = reads(self.sweep.plan, point)
            slot = next((s for s in self.free if not kind or kind in self.places[s.index].datasets), None)
            if slot is not None and point.key not in self.sweep.done:
                return index, slot
        return None

    def _start(self, pool: ThreadPoolExecutor, point: PlannedPoint, slot: Slot) -> None:
        flight = _Flight(point, slot, time.monotonic())
        self.flying[pool.submit(self._measure, flight)] = flight
        self._show()

    def _measure(self, flight: _Flight) -> PointRun:
        """A worker thread's part: measure the point in its slot, and mark it."""
        run = self.sweep.measure_steadily(flight.point, flight.t0, self.places[flight.slot.index])
        run.result.extra["parallel"] = flight.slot.mark(len(self.setup.slots))
        if flight.point.key in self.checks:
            run.result.extra["interference_check"] = flight.point.key
        return run

    def _collect(self) -> None:
        """Commit the points that ended (in the order they started); a worker's exception ends the
        sweep once the others that ended with it are stored."""
        if not self.flying:
            return
        ended, _ = wait(self.flying, timeout=POLL_S, return_when=FIRST_COMPLETED)
        failure: BaseException | None = None
        for future in sorted(ended, key=lambda f: self.flying[f].t0):
            flight = self.flying.pop(future)
            self.free.append(flight.slot)
            exc = future.exception()
            if exc is not None:
                failure = failure or exc
                continue
            run = future.result()
            self.sweep.commit(flight.point, run, flight.t0)
            if flight.point.key in self.checks and run.result.status in USABLE_STATUSES:
                self._due_alone(flight.point, flight.slot)
        self.free.sort(key=lambda slot: slot.index)
        if failure is not None:
            raise failure
        self._show()

    def _measure_alone(self, point: PlannedPoint, slot: Slot) -> None:
        """An interference check's measurement alone: the shape once more in the slot it ran in,
        with nothing else running; stored under `alone_key`."""
        sweep = self.sweep
        if not sweep.has_time_for(point):
            return
        t0 = time.monotonic()
        label = f"{point.label()}, alone in slot {slot.index} (interference check)"
        sweep.bar.start(sweep.completed + 1, label, sweep.completed)
        run = sweep.measure_steadily(point, t0, self.places[slot.index])
        run.result.extra["interference_check"] = point.key
        run.result.extra["alone"] = {"slot": slot.index, "gpu": None if slot.gpu is None else slot.gpu.index}
        sweep.commit(point, run, t0, key=alone_key(point.key), label=label)

    def _show(self) -> None:
        """The points in flight, on the progress bar."""
        if self.flying:
            labels = "; ".join(f"[slot {f.slot.index}] {f.point.label()}" for f in self.flying.values())
            self.sweep.bar.start(self.sweep.completed + len(self.flying), f"{len(self.flying)} in flight: {labels}",
                                 self.sweep.completed)


def parallel_summary(setup: ParallelSetup, store: Store, sweep_id: int) -> dict[str, Any]:
    """What the sweep hands back of its slots, and the interference check over its stored points."""
    return {**setup.outline(), "measured": parallel_context(store.points(sweep_id))}


def describe_parallel(summary: dict[str, Any]) -> str:
    """One line on a parallel sweep's slots and its interference check."""
    line = f"parallel: {len(summary.get('slots') or [])} slots"
    if summary.get("copy_bytes"):
        line += f"; dataset copies {format_bytes(summary['copy_bytes'])} in {summary.get('copy_seconds', 0):.0f} s"
    measured = summary.get("measured") or {}
    checks = [c for c in measured.get("checks") or [] if c.get("difference") is not None]
    if checks:
        line += (f"; interference check on {len(checks)} shape(s), parallel against alone: median "
                 f"{measured['median_difference']:+.1%}, largest {measured['max_difference']:+.1%}")
    else:
        line += "; no shape measured both in parallel and alone yet"
    return line
