"""Does an adaptive sweep reach the full grid's answer with a fifth of its points?

Replays the adaptive strategy (`sizer.sweep.adaptive`) against stored full-grid sweeps, measuring
nothing: each time it chooses a shape, the shape's stored measurement stands in for a new one.

- The grid's answer: every stored point of the workload entry fitted as the report fits it; the
  pick (instance and disk class, or none where no option meets the tolerance) and the model's vCPU
  knee with its range at --confidence.
- The stored replay: a chosen shape reads its stored passes in the order they were measured.
- Noisy replays (--replays, seeded): each measurement of a chosen shape reads one of its stored
  passes drawn at random, one not read yet in that replay.
- The strategy measures as a sweep without --passes does: each shape once, and again where its
  windows spread or the pick turns on it (--passes N: each shape N times). A shape asked for more
  often than the grid measured it (its passes: column P) has nothing more to read: the measurement
  counts against the budget and reads as failed. Nothing is made up.
- The grid under the same noise: every shape of the grid read once, drawn the same way: how often
  the grid itself, measured once, gives its own answer.
- Slots (--slots, default 1 and 4): a replay of K slots measures up to K of the entry's points at
  once, as `sizer sweep --strategy adaptive --parallel K` does (the start's shapes and the passes of
  a shape taken side by side; a choice that depends on measurements waits for them), each taking a
  drawn time, so they are stored in the order they end, not the order chosen.

An entry without a usable point with real input (every point failed) has no grid to reach: it is
named and skipped.

A replay reaches the grid's pick when its instance and disk class are the grid's (none for none),
and the grid's knee when its own knee lies in the grid's knee range (a knee not reached matches a
range not reached; a range open above takes any knee from its low end up). Each entry's budget is
--share (default 20%) of the grid's points: every measurement the grid sweep stored for the entry,
its passes, refinements and GPU ceiling included, rounded down. The acceptance: for every entry of
every store, at least --need (default 95) of the replays reach the grid's pick within the budget.
Beside it: how many noisy replays stopped "stable" on another pick than the grid's (an answer sure
of itself and wrong), and on how many entries the grid read once keeps its own pick.

Every store is copied before it is opened (opening may migrate a store). Default stores: the
repository's examples/*/sizer.sqlite and lab/replicates/*/*.sqlite.

--compare LIVE STORE: instead, the answer of a live adaptive sweep (its store) against the grid
store's for the same workload entry (lab/gpu/adaptive_live.sh).

Usage: .venv/bin/python lab/benchmarks/adaptive_replay.py [STORE...] [--replays N] [--share F] [--need N]
       [--confidence C] [--slots K[,K...]] [--passes N] [--workers N] [--json]
       .venv/bin/python lab/benchmarks/adaptive_replay.py --compare LIVE STORE [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.catalog import load_catalog, normalize_gpu  # noqa: E402
from sizer.diskclasses import load_disk_classes  # noqa: E402
from sizer.errors import SizerError  # noqa: E402
from sizer.facts import with_facts  # noqa: E402
from sizer.model.evaluate import fit_group  # noqa: E402
from sizer.points import (
    Point,  # noqa: E402
    combine_passes,  # noqa: E402
)
from sizer.shapes import InstanceShape, PlannedPoint, shape_key  # noqa: E402
from sizer.sizing import SizingTerms, size, sweep_host_speeds  # noqa: E402
from sizer.store import Store  # noqa: E402
from sizer.sweep.adaptive import AdaptiveChooser, AdaptiveTerms, Answer, answer_of  # noqa: E402
from sizer.sweep.strategy import DEFAULT_PASSES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED = 34


@dataclass
class Entry:
    """One workload entry of one stored sweep: its grid as a one-pass plan, and every stored
    measurement per shape (by the key of the shape's first pass), in the order measured."""

    store: str
    label: str
    gpu: str
    candidates: list[PlannedPoint]
    passes: dict[str, list[tuple[str, Point]]] = field(default_factory=dict)
    host_speeds: tuple[tuple[float, ...], ...] = ()  # the host's speed over the stored sweep (its timeline)

    @property
    def grid_points(self) -> int:
        return sum(len(v) for v in self.passes.values())

    @property
    def grid_passes(self) -> int:
        """The grid's passes: how often it measured most of its real shapes (refinements aside)."""
        counts = Counter(len(v) for v in self.passes.values() if v[0][1].input != "synthetic")
        return max(counts.items(), key=lambda kv: (kv[1], -kv[0]))[0] if counts else 1


# ---------------------------------------------------------------------------- the stores
def default_stores() -> list[Path]:
    return sorted(ROOT.glob("examples/*/sizer.sqlite")) + sorted(ROOT.glob("lab/replicates/*/*.sqlite"))


def _planned(key: str, point: Point) -> PlannedPoint:
    """The first-pass plan point a stored key stands for: '<workload>/<profile>/<shape>[/k=v,...]'."""
    parts = shape_key(key).split("/", 3)
    config = dict(kv.split("=", 1) for kv in parts[3].split(",")) if len(parts) > 3 and parts[3] else {}
    planned = PlannedPoint(point.workload, point.profile, InstanceShape(point.vcpus, point.ram_gib, point.disk_class),
                           config, ceiling=config.get("input") == "synthetic")
    if planned.key != shape_key(key):
        raise SizerError(f"stored key {key!r} does not name its shape")
    return planned


SKIPPED: list[str] = []  # entries without a usable real-input point, named by `load_entries`


def load_entries(path: Path, workdir: Path) -> list[Entry]:
    """The workload entries of every sweep of a store (copied to `workdir` first); an entry none of
    whose real-input points is usable is named in SKIPPED and left out."""
    copy = workdir / f"{len(list(workdir.iterdir()))}-{path.name}"
    shutil.copyfile(path, copy)
    entries: list[Entry] = []
    with Store(copy, create=False) as store:
        for sweep in store.sweeps():
            points = with_facts(store.points(sweep.id))
            pairs = [(row["key"], point) for row, point in zip(store.point_rows(sweep.id), points)]
            gpus = Counter(normalize_gpu(p.gpu_model) for _, p in pairs if p.gpu_model)
            gpu = gpus.most_common(1)[0][0] if gpus else _store_gpu(store)
            entries += _sweep_entries(_short(path), gpu, pairs, sweep_host_speeds([sweep.calibration]))
    return entries


def _store_gpu(store: Any) -> str:
    """The GPU the store's other sweeps measured on (a sweep of a job that used none sizes for it)."""
    gpus = Counter(normalize_gpu(p.gpu_model) for p in store.points() if p.gpu_model)
    return gpus.most_common(1)[0][0] if gpus else "H100"


def _sweep_entries(store: str, gpu: str, pairs: list[tuple[str, Point]],
                   host_speeds: tuple[tuple[float, ...], ...] = ()) -> list[Entry]:
    ceilings = [(k, p) for k, p in pairs if p.input == "synthetic"]
    real = [(k, p) for k, p in pairs if p.input != "synthetic"]
    by_entry: dict[tuple, list[tuple[str, Point]]] = {}
    for key, point in real:
        planned = _planned(key, point)
        by_entry.setdefault((planned.workload, tuple(sorted(planned.config.items()))), []).append((key, point))
    out = []
    for (workload, config), members in sorted(by_entry.items()):
        own_ceiling = [(k, p) for k, p in ceilings if p.workload == workload]
        label = workload + "".join(f":{k}={v}" for k, v in config)
        if not any(p.usable for _, p in members):
            statuses = Counter(p.status for _, p in members)
            SKIPPED.append(f"{store} {label}: no usable point ({', '.join(f'{n} {s}' for s, n in statuses.items())})")
            continue
        entry = Entry(store, label, gpu, [], host_speeds=host_speeds)
        for key, point in members + own_ceiling:
            planned = _planned(key, point)
            if planned.key not in entry.passes:
                entry.candidates.append(planned)
            entry.passes.setdefault(planned.key, []).append((key, point))
        probe = AdaptiveChooser(entry.candidates, _terms(entry, None))
        if probe.ceiling is None:  # a ceiling that does not bound the entry is not part of its grid
            entry.candidates = [c for c in entry.candidates if not c.ceiling]
            entry.passes = {k: v for k, v in entry.passes.items() if not v[0][1].input == "synthetic"}
        out.append(entry)
    return out


def _short(path: Path) -> str:
    """A committed store's path under examples/ or lab/ (h100/sizer.sqlite, replicates/h100/...)."""
    for folder in (ROOT / "examples", ROOT / "lab"):
        if path.resolve().is_relative_to(folder):
            return str(path.resolve().relative_to(folder))
    return str(path)


_TABLES: dict[str, Any] = {}


def _terms(entry: Entry, max_points: int | None, confidence: float = 0.9,
           passes: int | None = DEFAULT_PASSES) -> AdaptiveTerms:
    """As the sweep would judge the entry: its GPU's catalog rows and its host's speed over the sweep."""
    if "disks" not in _TABLES:  # one table per process: the fit cache knows it by identity
        _TABLES["disks"] = load_disk_classes()
    sizing = SizingTerms(tuple(load_catalog(builtin=True, gpu=entry.gpu)), entry.gpu, _TABLES["disks"],
                         confidence=confidence, host_speeds=entry.host_speeds)
    return AdaptiveTerms(sizing, max_points=max_points, passes=passes)


# ---------------------------------------------------------------------------- replays
def grid_answer(entry: Entry, terms: AdaptiveTerms, points: list[Point] | None = None) -> Answer | None:
    points = points if points is not None else [p for pairs in entry.passes.values() for _, p in pairs]
    fit = fit_group(entry.candidates[0].workload, points, dict(terms.disk_classes))
    return None if fit is None else answer_of(size(combine_passes(points), fit, terms.sizing))


def replay(entry: Entry, chooser: AdaptiveChooser, rng: random.Random | None,
           slots: int = 1) -> tuple[Answer | None, int, str]:
    """One replay: (its answer, the points it measured, why it stopped). `rng` None: stored order,
    and with `slots` > 1 the points in flight end in the order they started; else each measurement
    reads a drawn pass and takes a drawn time. Up to `slots` of the entry's points are in flight."""
    measured: list[tuple[str, Point]] = []
    drawn: dict[str, list[int]] = {}
    flying: list[tuple[float, int, str, Point]] = []  # (ends at, order started, key, measurement)
    clock, started = 0.0, 0
    while True:
        step = None
        while len(flying) < slots:
            step = chooser.step(measured, [key for _, _, key, _ in flying])
            if step.point is None:
                break
            flying.append((clock + (1.0 if rng is None else rng.uniform(0.5, 1.5)), started, step.point.key,
                           _draw(entry, step.point, drawn, rng)))
            started += 1
        if not flying:
            assert step is not None and not step.waiting
            return step.answer, len(measured), step.stopped
        flying.sort()
        clock, _, key, point = flying.pop(0)
        measured.append((key, point))


def _draw(entry: Entry, point: PlannedPoint, drawn: dict[str, list[int]], rng: random.Random | None) -> Point:
    """The stored measurement a chosen point reads: the shape's next stored pass in stored order, or
    one drawn at random of those not read yet in this replay; where every stored pass has been read, a
    failed measurement (the grid has nothing more to tell)."""
    base = shape_key(point.key)
    stored = entry.passes[base]
    left = [i for i in range(len(stored)) if i not in drawn.get(base, [])]
    if not left:  # the grid measured it no more often: nothing to read, and nothing made up
        return dataclasses.replace(stored[0][1], status="error", throughput=0.0, spread=0.0)
    index = left[0] if rng is None else rng.choice(left)
    drawn.setdefault(base, []).append(index)
    return stored[index][1]


def reaches(answer: Answer | None, grid: Answer) -> tuple[bool, bool]:
    """(the grid's pick, the grid's knee) reached."""
    if answer is None:
        return False, False
    return answer.pick == grid.pick, answer.knee_within(grid.knee_low, grid.knee_high)


@dataclass(frozen=True)
class Job:
    """A share of one entry's work, for one worker: the stored replay (`first` 0 only), noisy
    replays `first` to `last` - 1, and the grid measured once with the same seeds."""

    entry: Entry
    first: int
    last: int
    share: float
    confidence: float
    slots: int = 1
    passes: int | None = DEFAULT_PASSES  # the sweep's (--passes); None: one, a second where asked

    @property
    def budget(self) -> int:
        return max(1, math.floor(self.share * self.entry.grid_points + 1e-9))


def run_job(job: Job) -> dict[str, Any]:
    """One job's replays: per replay (its answer's pick and knee against the grid's, its points, why
    it stopped, its pick in words), and per grid draw (pick, knee)."""
    entry = job.entry
    terms = _terms(entry, job.budget, job.confidence, job.passes)
    grid = grid_answer(entry, terms)
    if grid is None:
        return {"error": "the grid cannot be fitted"}
    chooser = AdaptiveChooser(entry.candidates, terms)
    out: dict[str, Any] = {"grid": grid.as_dict(), "noisy": [], "grid_once": []}
    if job.first == 0:
        answer, used, stopped = replay(entry, chooser, None, job.slots)
        pick, knee = reaches(answer, grid)
        out["stored"] = {"points": used, "share": used / entry.grid_points, "pick": pick, "knee": knee,
                         "stopped": stopped, "answer": None if answer is None else answer.as_dict()}
    for i in range(job.first, job.last):
        answer, used, stopped = replay(entry, chooser, random.Random(_seed(entry, i)), job.slots)
        out["noisy"].append((*reaches(answer, grid), used, stopped, _pick_text(answer)))
        rng = random.Random(_seed(entry, i))
        points = [rng.choice(pairs)[1] for _, pairs in sorted(entry.passes.items())]
        out["grid_once"].append(reaches(grid_answer(entry, terms, points), grid))
    return out


def merge(entry: Entry, job: Job, parts: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """One entry's row from its jobs' parts."""
    head = {"store": entry.store, "workload": entry.label, "gpu": entry.gpu, "grid_points": entry.grid_points,
            "grid_shapes": len(entry.candidates), "passes": entry.grid_passes, "budget": job.budget, "slots": job.slots}
    if any("error" in p for p in parts):
        return {**head, "error": "the grid cannot be fitted"}
    noisy = [row for p in parts for row in p["noisy"]]
    once = [row for p in parts for row in p["grid_once"]]
    used = [row[2] for row in noisy]
    return {
        **head,
        "grid": parts[0]["grid"],
        "stored": next(p["stored"] for p in parts if "stored" in p),
        "noisy": {"replays": len(noisy), "pick": sum(r[0] for r in noisy), "knee": sum(r[1] for r in noisy),
                  "both": sum(r[0] and r[1] for r in noisy), "points_mean": sum(used) / max(len(used), 1),
                  "points_max": max(used, default=0), "stopped": dict(Counter(r[3] for r in noisy)),
                  "settled": sum(r[3] == "stable" for r in noisy),  # stopped "stable", and of those at the grid's pick
                  "settled_pick": sum(r[0] and r[3] == "stable" for r in noisy),
                  "picks": dict(Counter(r[4] for r in noisy).most_common())},
        "grid_noisy": {"pick": sum(r[0] for r in once), "knee": sum(r[1] for r in once)},
        "seconds": round(seconds, 1),
    }


def _seed(entry: Entry, i: int) -> str:
    return f"{SEED}:{entry.store}:{entry.label}:{i}"


def _pick_text(answer: Answer | None) -> str:
    if answer is None:
        return "no fit"
    return "none" if answer.instance is None else f"{answer.instance.split(':')[-1]} {answer.disk_class}"


# ---------------------------------------------------------------------------- output
def _knee_text(answer: dict[str, Any] | None) -> str:
    if not answer:
        return "-"
    if answer["knee_low"] is None:
        return "none"
    high = ">" if answer["knee_high"] is None else str(answer["knee_high"])
    return f"{answer['knee']} ({answer['knee_low']}-{high})"


def print_table(rows: list[dict[str, Any]], need: int, share: float) -> bool:
    """The table (stored replay; noisy replays: mean and most points, how many reached the grid's
    pick and knee; the grid measured once; the grid's answer, `*` where its pick differs at the
    optimistic end of its ranges) and whether the acceptance holds."""
    store_w = max([len(r["store"]) for r in rows] + [5])
    name_w = max([len(r["workload"]) for r in rows] + [8])
    print(f"{'store':<{store_w}} {'workload':<{name_w}} {'grid':>4} {'P':>1} {'cap':>3} | stored: {'used':>4} {'share':>5} "
          f"{'pick':>4} {'knee':>4} | noisy: {'used (most)':>11} {'pick':>4} {'knee':>4} | grid once: {'pick':>4} "
          f"{'knee':>4} | grid's pick / knee")
    holds = True
    held, robust = [], []  # per entry: the acceptance holds; the grid keeps its own pick when read once
    for r in rows:
        if "error" in r:
            print(f"{r['store']:<{store_w}} {r['workload']:<{name_w}} {r['error']}")
            holds = False
            held.append(False)
            robust.append(False)
            continue
        s, n, g = r["stored"], r["noisy"], r["grid_noisy"]
        grid_pick = _pick_text(Answer(**r["grid"])) + ("" if r["grid"]["stable"] else " *")
        print(f"{r['store']:<{store_w}} {r['workload']:<{name_w}} {r['grid_points']:>4} {r['passes']:>1} {r['budget']:>3} | "
              f"{s['points']:>12} {s['share']:>5.0%} {'yes' if s['pick'] else 'no':>4} {'yes' if s['knee'] else 'no':>4} | "
              f"{n['points_mean']:>12.1f} ({n['points_max']:>2}) {n['pick']:>4} {n['knee']:>4} | "
              f"{g['pick']:>15} {g['knee']:>4} | {grid_pick} / {_knee_text(r['grid'])}")
        held.append(n["replays"] > 0 and n["pick"] >= need * n["replays"] / 100 and n["points_max"] <= r["budget"])
        robust.append(n["replays"] > 0 and g["pick"] >= need * n["replays"] / 100)
        holds = holds and held[-1]
    if rows:
        print(f"replayed in {rows[0].get('seconds', 0):.0f} s; * the grid's own pick differs at the optimistic end "
              "of its ranges")
    print(f"acceptance (<= {share:.0%} of the grid's points, >= {need} of 100 noisy replays reach the grid's pick, "
          f"every entry): {'holds' if holds else 'does not hold'}; it holds for {sum(held)} of {len(rows)} entries")
    settled = [r["noisy"] for r in rows if "error" not in r]
    print(f"noisy replays that stopped \"stable\": {sum(n['settled'] for n in settled)} of "
          f"{sum(n['replays'] for n in settled)}, on another pick than the grid's: "
          f"{sum(n['settled'] - n['settled_pick'] for n in settled)}")
    steady = [h for h, r in zip(held, robust) if r]
    print(f"grids that keep their own pick when read once (>= {need} of 100): {len(steady)} of {len(rows)} entries; "
          f"the target holds for {sum(steady)} of them")
    return holds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", type=Path, nargs="*", help="stores of full-grid sweeps (default: the examples)")
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--share", type=float, default=0.2, help="the budget as a share of the grid's points")
    parser.add_argument("--need", type=int, default=95, help="replays in 100 that must reach the grid's pick")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--slots", default="1,4", help="replay with K slots (points in flight at once), e.g. 1,4")
    parser.add_argument("--passes", type=int, default=None,
                        help="each shape's measurements, as `sizer sweep --passes` (default: once, again where asked)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare", type=Path, metavar="LIVE",
                        help="instead: the answer of a live adaptive sweep's store against the grid's "
                             "(the one STORE given) for the same workload entry, and whether they agree")
    args = parser.parse_args(argv)
    if args.compare is not None:
        return compare_live(args.compare, args.stores, args.confidence, args.json)
    try:
        slot_counts = [int(k) for k in args.slots.split(",")]
        with tempfile.TemporaryDirectory() as tmp:
            entries = [e for path in (args.stores or default_stores()) for e in load_entries(path, Path(tmp))]
        tables = {k: run_all(entries, args.replays, args.share, args.confidence, args.workers, slots=k,
                             passes=args.passes) for k in slot_counts}
    except (SizerError, ValueError) as exc:
        print(f"adaptive_replay: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"skipped": SKIPPED, "rows": [r for rows in tables.values() for r in rows]}, indent=2))
        return 0
    for line in SKIPPED:
        print(f"skipped: {line}")
    holds = True
    for k, rows in tables.items():
        print(f"\n{k} slot{'s' if k > 1 else ''}:")
        holds = print_table(rows, args.need, args.share) and holds
    return 0 if holds else 1


def compare_live(live: Path, grids: list[Path], confidence: float, as_json: bool) -> int:
    """Each workload entry of a live adaptive sweep's store: its answer (every point it measured,
    fitted as the report fits them) against the grid store's answer for the same entry; exit 0
    where every entry's pick and knee agree, 1 where one does not, 2 on bad input."""
    if len(grids) != 1:
        print("adaptive_replay: error: --compare LIVE wants exactly one grid store", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp:
            found = load_entries(live, Path(tmp))
            reference = {e.label: e for e in load_entries(grids[0], Path(tmp))}
    except SizerError as exc:
        print(f"adaptive_replay: error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for entry in found:
        grid_entry = reference.get(entry.label)
        terms = _terms(entry, None, confidence)
        answer = grid_answer(entry, terms)
        grid = None if grid_entry is None else grid_answer(grid_entry, _terms(grid_entry, None, confidence))
        pick, knee = (False, False) if grid is None else reaches(answer, grid)
        rows.append({"workload": entry.label, "gpu": entry.gpu, "points": entry.grid_points,
                     "grid_points": None if grid_entry is None else grid_entry.grid_points,
                     "live": None if answer is None else answer.as_dict(), "grid": None if grid is None else grid.as_dict(),
                     "pick_agrees": pick, "knee_agrees": knee})
    if as_json:
        print(json.dumps(rows, indent=2))
    for r in [] if as_json else rows:
        live_text = "no fit" if r["live"] is None else f"{_pick_text(Answer(**r['live']))} / knee {_knee_text(r['live'])}"
        grid_text = ("no such entry in the grid store" if r["grid"] is None
                     else f"{_pick_text(Answer(**r['grid']))} / knee {_knee_text(r['grid'])}")
        print(f"{r['workload']} on {r['gpu']}:")
        print(f"  live adaptive sweep ({r['points']} points): {live_text}")
        print(f"  grid sweep ({r['grid_points']} points):       {grid_text}")
        print(f"  pick (instance and disk class) agrees: {'yes' if r['pick_agrees'] else 'no'}; "
              f"knee within the grid's range: {'yes' if r['knee_agrees'] else 'no'}")
    return 0 if rows and all(r["pick_agrees"] and r["knee_agrees"] for r in rows) else 1


def run_all(entries: list[Entry], replays: int, share: float, confidence: float, workers: int,
            chunk: int = 25, cache: bool = True, slots: int = 1, passes: int | None = DEFAULT_PASSES) -> list[dict[str, Any]]:
    """Every entry's row at `slots` slots, its replays in chunks spread over `workers` processes
    (`cache`: each process fits a group of points once, `cache_fits`)."""
    t0 = time.monotonic()
    jobs = [Job(e, first, min(first + chunk, replays), share, confidence, slots, passes)
            for e in entries for first in range(0, max(replays, 1), chunk)]
    if workers <= 1:
        if cache:
            cache_fits()
        parts = [run_job(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=cache_fits if cache else None) as pool:
            parts = list(pool.map(run_job, jobs))
    seconds = time.monotonic() - t0
    return [merge(e, next(j for j in jobs if j.entry is e),
                  [p for j, p in zip(jobs, parts) if j.entry is e], seconds) for e in entries]


def cache_fits() -> None:
    """Fit each group of points once per process: replays that drew the same measurements, and the
    refits that hold out a level of nearly the same points, ask for the same fits again and again.
    A fit is handed out as a copy with a list of notes of its own: its callers set attributes on it
    and add notes."""
    import dataclasses

    from sizer.model import fit as fit_module

    original = fit_module.fit_workload
    if getattr(original, "cached", False):
        return
    fits: dict[tuple, Any] = {}

    def copied(fit: Any) -> Any:
        return None if fit is None else dataclasses.replace(fit, notes=list(fit.notes))

    def cached(name: str, group: list[Point], disk_classes: Any, dataset_gib: float | None,
               disk_mbps: dict[str, float], do_loo: bool, smooth: bool | None) -> Any:
        key = (name, tuple(repr(p) for p in group), id(disk_classes), dataset_gib, tuple(sorted(disk_mbps.items())),
               do_loo, smooth)
        if key not in fits:
            fits[key] = copied(original(name, group, disk_classes, dataset_gib, disk_mbps, do_loo, smooth))
        return copied(fits[key])

    cached.cached = True  # type: ignore[attr-defined]
    fit_module.fit_workload = cached  # type: ignore[assignment]


if __name__ == "__main__":
    sys.exit(main())
