"""A parallel sweep's dataset copies: slot 0 reads each dataset itself, slot i > 0 a copy of its
own beside the data folder (`copy_target`), so that its points' page cache is their own (the page
cache is charged to the group that first reads a page: a shared copy would let one point's cache
serve another, and one point's eviction make another's cold).

A slot gets a copy of a dataset only where it will read it: of the points left to measure, a
dataset read by n of them goes to the first n slots at most (`slot_kinds`; slot 0 reads it in
place), and a point with its input on the device reads none. The copies are made before the
points they serve start, with nothing measuring meanwhile (a copy reads the dataset a point in
slot 0 reads, into the page cache), all at once on threads (`make_copies`), and what they cost in
bytes and seconds is said and kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from sizer import cache
from sizer.errors import SizerError
from sizer.limits import block_device_for
from sizer.shapes import PlannedPoint
from sizer.sweep.data import Dataset, dataset_bytes_estimate, dataset_dir
from sizer.sweep.placement import Slot
from sizer.sweep.plan import SweepPlan
from sizer.units import GIB, format_bytes

COPY_MARGIN_BYTES = GIB // 4  # free space left beside the copies
COPY_CHUNK_BYTES = 8 << 20
COPY_THREADS = 8  # files copied at once (each read once from the source, written to every slot's copy)


@dataclass(frozen=True)
class DatasetCopy:
    """Slot `slot`'s copy of a dataset, and the bytes it still needs on disk (0: already there)."""
    kind: str
    slot: int
    source: Path
    target: Path
    missing_bytes: int


@dataclass(frozen=True)
class CopyCost:
    """What the copies made before a run's points cost: bytes written, seconds, and the copies."""
    bytes: int
    seconds: float
    copies: tuple[tuple[str, int], ...]  # (dataset, slot) of each copy made now

    def line(self) -> str:
        where = ", ".join(f"{kind} to slot {slot}" for kind, slot in self.copies)
        rate = f", {self.bytes / self.seconds / 1e6:,.0f} MB/s" if self.seconds > 0 else ""
        return f"dataset copies: {where}: {format_bytes(self.bytes)} in {self.seconds:.0f} s{rate}, before their points"


# ---------------------------------------------------------------- which slot reads what
def reads(plan: SweepPlan, point: PlannedPoint) -> str:
    """The dataset a point reads ("": none, as a point with its input on the device)."""
    return "" if point.ceiling else plan.classes[point.workload].dataset


def slot_kinds(plan: SweepPlan, points: Iterable[PlannedPoint], slots: Sequence[Slot]) -> dict[int, tuple[str, ...]]:
    """The datasets each slot reads: one read by n of `points` goes to the first n slots at most
    (slot 0 first, which reads it in place), so no slot gets a copy no point of it will read."""
    counts = Counter(kind for p in points if (kind := reads(plan, p)))
    return {slot.index: tuple(sorted(k for k, n in counts.items() if slot.index < n)) for slot in slots}


def copy_target(data_dir: Path, kind: str, slot: int) -> Path:
    """Where slot `slot` (1 or more) reads its copy of `kind`: <data>.slot-i/<kind>, beside the
    data folder, never in it: the `files` dataset is the data folder itself, so a copy inside would
    be read by slot 0 and copied into every other slot's `files` copy."""
    return data_dir.with_name(f"{data_dir.name}.slot-{slot}") / kind


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".copied.json")


def fingerprint(folder: Path) -> dict[str, int]:
    """The files under `folder` and their bytes: a copy with the same is current."""
    files = list(cache.dataset_files(folder))
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}


def copy_is_current(source: Path, target: Path, prints: dict[str, int] | None = None) -> bool:
    """Whether `target` is a current copy of `source` (`prints`: its fingerprint, if taken already)."""
    try:
        if not target.is_dir():
            return False
        return json.loads(_marker(target).read_text()) == (fingerprint(source) if prints is None else prints)
    except (OSError, ValueError):
        return False


def plan_copies(plan: SweepPlan, slots: list[Slot], points: Sequence[PlannedPoint] | None = None) -> list[DatasetCopy]:
    """The copies the extra slots need for `points` (default: the plan's), and the bytes one not yet
    made needs (the dataset's own size, or its estimate before it is generated)."""
    wanted = slot_kinds(plan, plan.points if points is None else points, slots)
    copies = []
    for kind in sorted({k for kinds in wanted.values() for k in kinds}):
        source = dataset_dir(plan.data_dir, kind)
        prints = fingerprint(source) if source.is_dir() else {"files": 0, "bytes": 0}  # one walk per dataset
        exists = prints["files"] > 0
        size = prints["bytes"] if exists else dataset_bytes_estimate(kind, plan.profile)
        for slot in slots[1:]:
            if kind not in wanted[slot.index]:
                continue
            target = copy_target(plan.data_dir, kind, slot.index)
            current = exists and copy_is_current(source, target, prints)
            copies.append(DatasetCopy(kind, slot.index, source, target, 0 if current else size))
    return copies


def _existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def copy_space_problem(need: int, free: int, count: int, data_dir: Path) -> str | None:
    """Why copies of `need` bytes do not fit in `free` (leaving COPY_MARGIN_BYTES), or None."""
    if need and need + COPY_MARGIN_BYTES > free:
        return (f"--parallel {count}: the slots' dataset copies need {format_bytes(need)} on the disk of {data_dir}, "
                f"which has {format_bytes(free)} free: free some space or give a smaller --parallel")
    return None


def check_copy_space(plan: SweepPlan, copies: list[DatasetCopy], count: int) -> None:
    """The copies can be written, on the disk of the data (its throttle is theirs), and fit there."""
    if not copies:
        return
    anchor = _existing_parent(copies[0].target)
    if not os.access(anchor, os.W_OK):
        raise SizerError(f"--parallel {count}: the slots' dataset copies cannot be written under {anchor}")
    if plan.device is not None and block_device_for(anchor) != plan.device:
        raise SizerError(f"--parallel {count}: the slots' dataset copies would lie under {anchor}, on another "
                         f"disk than the data ({plan.data_dir}), so its disk class would not hold for them; give "
                         f"--data a folder inside that disk (e.g. {plan.data_dir / 'sizer-data'}): copies lie beside it")
    problem = copy_space_problem(sum(c.missing_bytes for c in copies), shutil.disk_usage(anchor).free, count, plan.data_dir)
    if problem:
        raise SizerError(problem)


def ensure_copy(source: Path, target: Path, prints: dict[str, int] | None = None) -> bool:
    """Make `target` a copy of `source` (new files, so pages of their own), unless a current one is
    there; whether it copied now (`copy_to_many` with one target)."""
    return bool(copy_to_many(source, [target], prints))


def copy_to_many(source: Path, targets: Sequence[Path], prints: dict[str, int] | None = None) -> list[Path]:
    """Make each of `targets` a copy of `source` unless a current one is there; the targets copied
    now. Each file is read once and written to every target, on COPY_THREADS threads (a dataset is
    tens of thousands of small files: one at a time, a copy waits on each). Written beside each
    target, then moved in: a copy cut short is never taken for a whole one. `prints`: the source's
    fingerprint, if taken already."""
    prints = fingerprint(source) if prints is None else prints
    todo = [t for t in targets if not copy_is_current(source, t, prints)]
    if not todo:
        return []
    partials = []
    for target in todo:
        _marker(target).unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        partials.append(target.with_name(target.name + ".partial"))
        shutil.rmtree(partials[-1], ignore_errors=True)
    files = []
    for folder, _, names in os.walk(source):
        relative = Path(folder).relative_to(source)
        for partial in partials:
            (partial / relative).mkdir(parents=True, exist_ok=True)
        files += [relative / name for name in names]

    def copy_one(relative: Path) -> None:
        with contextlib.ExitStack() as files:
            reader = files.enter_context(open(source / relative, "rb"))
            writers = [files.enter_context(open(partial / relative, "wb")) for partial in partials]
            while chunk := reader.read(COPY_CHUNK_BYTES):  # a packed format's one file may be gigabytes
                for writer in writers:
                    writer.write(chunk)

    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="sizer-copy") as pool:
        list(pool.map(copy_one, files))
    for target, partial in zip(todo, partials):
        os.replace(partial, target)
        _marker(target).write_text(json.dumps(prints))  # taken before copying: a source changed meanwhile is copied again
        cache.evict(target)  # the copy's pages go from the host's cache: each point evicts its copy anyway
    return todo


def make_copies(datasets: Mapping[str, Dataset], wanted: Mapping[int, Sequence[str]], data_dir: Path,
                note: Callable[[str], None]) -> tuple[dict[int, dict[str, Dataset]], CopyCost]:
    """Each slot's datasets (`wanted`: slot -> the kinds it reads): slot 0's own, the others' copies,
    those not current made now (each dataset read once for all its slots); and what that cost."""
    out: dict[int, dict[str, Dataset]] = {}
    todo: dict[str, list[tuple[int, Path]]] = {}
    prints = {kind: fingerprint(d.path) for kind, d in datasets.items()
              if any(kind in kinds for slot, kinds in wanted.items() if slot)}
    for slot, kinds in wanted.items():
        out[slot] = {}
        for kind in kinds:
            dataset = datasets[kind]
            if slot == 0:
                out[slot][kind] = dataset
                continue
            target = copy_target(data_dir, kind, slot)
            if not copy_is_current(dataset.path, target, prints[kind]):
                todo.setdefault(kind, []).append((slot, target))
            out[slot][kind] = Dataset(kind, target, {**dataset.info, "path": str(target)})
    made = tuple((kind, slot) for kind, jobs in todo.items() for slot, _ in jobs)
    if not made:
        return out, CopyCost(0, 0.0, ())
    total = sum(datasets[kind].nbytes for kind, _ in made)
    note(f"copying {format_bytes(total)} for the slots that read it: "
         + ", ".join(f"{kind} to slot {slot}" for kind, slot in made) + " (nothing measures meanwhile)")
    t0 = time.monotonic()
    for kind, jobs in todo.items():
        copy_to_many(datasets[kind].path, [target for _, target in jobs], prints[kind])
    cost = CopyCost(total, time.monotonic() - t0, made)
    note(cost.line())
    return out, cost
