"""The adaptive chooser (`sizer.sweep.adaptive`) on points made from a known bottleneck model:
where it starts, that it measures near the knee and other disks and RAM only where they decide the
pick, takes another pass only where the answer turns on a shape (never of one a throttle holds),
stops once the answer holds, keeps to its budget, and chooses the same again from the same stored
points (a resumed sweep, a parallel one)."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from sizer.catalog import load_catalog
from sizer.diskclasses import load_disk_classes
from sizer.model.evaluate import fit_group
from sizer.points import Point
from sizer.shapes import build_plan, shape_key
from sizer.sizing import SizingTerms, size
from sizer.sweep.adaptive import (
    STOP_MAX_POINTS,
    STOP_STABLE,
    AdaptiveChooser,
    AdaptiveTerms,
    answer_of,
    shape_counts,
)

VCPUS = [2, 4, 8, 12, 16]
RAMS = [8.0, 32.0]
DISKS = ["local-nvme", "ssd", "standard"]
GPU = "NVIDIA H100 80GB HBM3"
CEILING = 4000.0
PER_VCPU = 350.0
MB_PER_SAMPLE = 0.11
DISK_MBPS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}


def _rate(vcpus: int, disk: str, ceiling: bool) -> float:
    """The known model: min(ceiling, USL in vCPUs, disk cap over the bytes a sample reads), times a
    fixed wobble of up to 1% per shape (a measurement is never the model exactly)."""
    if ceiling:
        return CEILING
    cpu = PER_VCPU * vcpus / (1 + 0.01 * (vcpus - 1))
    disk_mbps = DISK_MBPS[disk]
    io = float("inf") if disk_mbps is None else disk_mbps / MB_PER_SAMPLE
    wobble = int(hashlib.sha256(f"{vcpus}{disk}".encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5
    return min(CEILING, cpu, io) * (1 + 0.02 * wobble)


def _measure(point) -> Point:
    shape = point.shape
    rate = _rate(shape.vcpus, shape.disk_class, point.ceiling)
    return Point(workload=point.workload, vcpus=shape.vcpus, ram_gib=shape.ram_gib, disk_class=shape.disk_class,
                 throughput=rate, unit="images/s", profile="gpu", spread=0.02, gpu_model=GPU,
                 read_mb_per_sample=None if point.ceiling else MB_PER_SAMPLE, dataset_gib=5.4, footprint_gib=1.6,
                 input="synthetic" if point.ceiling else "files", decode="cpu", reads_once=False,
                 epochs=0.5)


@pytest.fixture(scope="module")
def grid():
    return build_plan([("resnet50-train", "imagenet", None, {})], VCPUS, RAMS, DISKS, "gpu")


def _sizing_terms() -> SizingTerms:
    return SizingTerms(tuple(load_catalog(builtin=True, gpu="H100")), "H100", load_disk_classes())


def _terms(max_points: int | None = None, passes: int | None = 2) -> AdaptiveTerms:
    return AdaptiveTerms(_sizing_terms(), max_points=max_points, passes=passes)


def _run(grid, terms: AdaptiveTerms):
    """The chooser against the known model until it stops: the measured (key, point) pairs and the last step."""
    chooser = AdaptiveChooser(grid, terms)
    measured: list[tuple[str, Point]] = []
    while True:
        step = chooser.step(measured)
        if step.point is None:
            return measured, step
        measured.append((step.point.key, _measure(step.point)))


def test_starts_at_the_ceiling_then_both_ends_of_the_knees_plane(grid):
    """The knee is searched on the fastest disk at the largest RAM: no slow disk, no small RAM at the start."""
    start = AdaptiveChooser(grid, _terms()).start()
    assert start[0].ceiling
    shapes = [(p.shape.vcpus, p.shape.ram_gib, p.shape.disk_class) for p in start[1:]]
    assert shapes == [(16, 32.0, "local-nvme"), (2, 32.0, "local-nvme")]


def test_stops_when_the_answer_holds_with_the_grids_answer_and_fewer_points(grid):
    measured, step = _run(grid, _terms())
    assert step.stopped == STOP_STABLE, step.why
    assert len(shape_counts(measured)) < len(grid) // 2  # fewer than half the shapes
    assert len(measured) < len(grid)  # each twice: fewer than half a two-pass grid's measurements
    everything = [_measure(p) for p in grid]
    whole = answer_of(size(everything, fit_group("resnet50-train", everything, load_disk_classes()), _sizing_terms()))
    assert step.answer.pick == whole.pick and step.answer.instance is not None
    assert step.answer.knee_within(whole.knee_low, whole.knee_high)


def test_measures_near_the_knee_after_the_start(grid):
    measured, step = _run(grid, _terms())
    after_start = [p for _, p in measured[5:] if p.disk_class == "local-nvme"]  # the start: 1 + 2 x 2
    assert after_start, "nothing measured on the fastest disk after the start"
    knee = step.answer.knee  # about 12 vCPUs: 350 per vCPU against a 4,000 ceiling
    assert knee is not None and 10 <= knee <= 14
    assert after_start[0].vcpus in (8, 12, 16)


def test_keeps_to_max_points_and_takes_no_shape_whose_passes_do_not_fit(grid):
    measured, step = _run(grid, _terms(max_points=6))
    # The ceiling once, then shapes of two passes each (--passes 2): a third shape's would make 7.
    assert len(measured) == 5
    assert sorted(shape_counts(measured).values()) == [1, 2, 2]
    assert step.stopped == STOP_MAX_POINTS
    assert step.answer is not None  # the answer of what was measured, for the report


def test_measures_each_shape_to_its_last_pass_before_the_next(grid):
    measured, _ = _run(grid, _terms(passes=3))
    shapes = [shape_key(k) for k, _ in measured]
    start = [p.key for p in AdaptiveChooser(grid, _terms()).start()]
    # The ceiling once, then the two start shapes, each three times in a row.
    assert shapes[:7] == [start[0]] + [k for k in start[1:] for _ in range(3)]
    assert len(set(k for k, _ in measured[:7])) == 7  # each pass its own stored point
    runs = [shapes[i] for i in range(len(shapes)) if i == 0 or shapes[i] != shapes[i - 1]]
    counts = shape_counts(measured)
    assert len(runs) == len(counts)  # no shape taken twice
    assert all(counts[k] == 3 for k in runs[1:-1])


def test_one_pass_measures_each_shape_once_unless_a_rule_asks_again(grid):
    measured, step = _run(grid, _terms(passes=1))
    shapes = [shape_key(k) for k, _ in measured]
    assert step.point is None
    assert all(a != b for a, b in zip(shapes, shapes[1:]))  # no shape measured twice in a row
    assert max(shape_counts(measured).values()) <= 2 and len(measured) < 2 * len(set(shapes))


def test_the_same_stored_points_give_the_same_choices(grid):
    first, _ = _run(grid, _terms())
    again, _ = _run(grid, _terms())
    assert [k for k, _ in first] == [k for k, _ in again]
    # A resumed sweep: a new chooser with what was stored before the kill chooses what came next.
    for cut in (3, 6, len(first) - 1):
        resumed = AdaptiveChooser(grid, _terms()).step(first[:cut])
        assert resumed.point is not None and resumed.point.key == first[cut][0]


def _option(disk: str, price: float, meets: bool, optimistic: bool, basis: str, predicted: float,
            dataset_cached: bool = False):
    from types import SimpleNamespace

    instance = SimpleNamespace(gpu_count=1, instance_type=f"g-{disk}", cloud="test")
    return SimpleNamespace(instance=instance, disk_class=disk, price_per_gpu_hour=price, meets=meets,
                           meets_optimistic=optimistic, basis=basis, predicted=predicted, share_vcpus=26.0,
                           share_memory_gib=234.0, disk_mbps=DISK_MBPS[disk], bottleneck="gpu",
                           dataset_cached=dataset_cached)


def test_an_option_only_the_untrusted_model_judges_is_open_where_its_figure_meets():
    """No measurement judges it and the model is not trusted: the model's figure meeting the
    tolerance leaves the verdict open (a measurement can decide it); one far below does not."""
    from types import SimpleNamespace

    from sizer.sweep.adaptive_terms import undecided

    near = _option("standard", 5.0, False, False, "not judged", 0.99 * CEILING)
    far = _option("ssd", 5.0, False, False, "not judged", 0.5 * CEILING)
    pick = _option("local-nvme", 5.0, True, True, "measured floor", CEILING)
    dearer = _option("ssd", 9.0, False, True, "measured floor", 0.9 * CEILING)
    rec = SimpleNamespace(considered=[pick, near, far, dearer], chosen=pick, ceiling=CEILING, tolerance=0.05)
    assert undecided(rec) == [near]


def test_an_open_option_is_told_by_the_largest_shape_it_contains_measured_once(grid):
    chooser = AdaptiveChooser(grid, _terms())
    option = _option("standard", 5.0, False, False, "not judged", CEILING)
    largest = chooser._telling(option, {})
    assert (largest.shape.vcpus, largest.shape.ram_gib, largest.shape.disk_class) == (16, 32.0, "standard")
    assert largest.pass_no == 1 and chooser._telling(option, {largest.key: 1}) is None


def test_an_option_whose_page_cache_holds_the_dataset_is_told_by_a_shape_on_any_disk(grid):
    """Its disk is not read past the first pass, so the largest shape it contains may be on a faster disk."""
    chooser = AdaptiveChooser(grid, _terms())
    option = _option("standard", 5.0, False, False, "not judged", CEILING, dataset_cached=True)
    largest = chooser._telling(option, {})
    assert (largest.shape.vcpus, largest.shape.ram_gib, largest.shape.disk_class) == (16, 32.0, "local-nvme")


def test_decided_points_run_beside_those_in_flight_and_a_choice_waits_for_them(grid):
    """The start's shapes and their passes depend on no measurement: they go out side by side. A
    choice fitted on measurements waits until none of the entry's is in flight; stored in the order
    they ended, the measurements give the choice a serial sweep makes."""
    chooser = AdaptiveChooser(grid, _terms())
    start = chooser.start()
    flying: list[str] = []
    while (step := chooser.step([], flying)).point is not None:
        flying.append(step.point.key)
    assert sorted(shape_key(k) for k in flying) == sorted([start[0].key] + [p.key for p in start[1:] for _ in (1, 2)])
    assert len(set(flying)) == len(flying) and step.waiting and step.stopped == ""
    serial, _ = _run(grid, _terms())
    assert sorted(k for k, _ in serial[:5]) == sorted(flying)
    ended = list(reversed(serial[:5]))  # the start stored in another order
    assert chooser.step(ended[:3], [k for k, _ in ended[3:]]).waiting
    assert chooser.step(ended).point.key == AdaptiveChooser(grid, _terms()).step(serial[:5]).point.key == serial[5][0]


def test_a_pass_cut_short_by_a_kill_leaves_its_number_free(grid):
    """Pass 2 of a shape stored, pass 1 killed in flight: the shape's next measurement takes the
    free number, never a stored key."""
    serial, _ = _run(grid, _terms())
    kept = [serial[0], serial[2]]  # the ceiling and the second pass of the first start shape
    step = AdaptiveChooser(grid, _terms()).step(kept)
    assert step.point.key == serial[1][0] and step.point.key not in {k for k, _ in kept}


def _whole_grid_answer(grid):
    everything = [_measure(p) for p in grid]
    return answer_of(size(everything, fit_group("resnet50-train", everything, load_disk_classes()), _sizing_terms()))


def test_by_default_other_disks_and_ram_wait_for_a_shape_that_decides_the_pick(grid):
    """Without --passes: each shape once, another pass where the pick rests on it. Here the page
    cache of every option holds the dataset, so shapes on the fastest disk judge every disk class:
    nothing is measured off the knee's plane, and the grid's answer comes from fewer measurements
    than two passes of each shape give."""
    measured, step = _run(grid, _terms(passes=None))
    assert step.stopped == STOP_STABLE, step.why
    whole = _whole_grid_answer(grid)
    assert step.answer.pick == whole.pick and step.answer.instance is not None
    assert step.answer.knee_within(whole.knee_low, whole.knee_high)
    assert {(p.ram_gib, p.disk_class) for _, p in measured} == {(32.0, "local-nvme")}
    counts = shape_counts(measured)
    top = next(k for k in counts if k.endswith("/16vcpu-32gib-local-nvme"))
    assert counts[top] == 3  # the pick rests on it: passes until three
    assert sorted(counts.values()).count(1) >= 3  # the rest once
    assert len(measured) < len(_run(grid, _terms(passes=2))[0])


def _point(vcpus: int, disk: str, rate: float, bottleneck: str, spread: float) -> Point:
    return Point(workload="resnet50-train", vcpus=vcpus, ram_gib=8.0, disk_class=disk, throughput=rate,
                 unit="images/s", profile="gpu", spread=spread, bottleneck=bottleneck, gpu_model=GPU,
                 read_mb_per_sample=MB_PER_SAMPLE, dataset_gib=5.4, footprint_gib=1.6, input="files", decode="cpu",
                 reads_once=False, epochs=0.5)


def test_a_shape_a_throttle_holds_never_takes_another_pass(grid):
    """Its windows spread, yet the standard disk's cap bound it: its passes agree by construction.
    A CPU-bound shape whose windows spread as far takes its second pass; one that failed takes none."""
    chooser = AdaptiveChooser(grid, _terms(passes=None))
    ceiling = next(p for p in grid if p.ceiling)
    key = {(p.shape.vcpus, p.shape.ram_gib, p.shape.disk_class): p.key for p in grid if not p.ceiling}
    measured = [(ceiling.key, _measure(ceiling)),
                (key[16, 8.0, "standard"], _point(16, "standard", 1265.0, "disk", 0.45)),
                (key[12, 8.0, "ssd"], dataclasses.replace(_point(12, "ssd", 0.0, "cpu", 0.0), status="error")),
                (key[4, 8.0, "local-nvme"], _point(4, "local-nvme", 1380.0, "cpu", 0.45))]
    fitted = chooser._fitted(measured)
    point, why = chooser._another_pass(fitted, measured, shape_counts(measured), {k for k, _ in measured})
    assert point.key == key[4, 8.0, "local-nvme"] + "#p2" and "spread by 45%" in why
    assert chooser._throttle_held(measured[1][1]) and not chooser._throttle_held(measured[3][1])
    again = measured + [(point.key, _point(4, "local-nvme", 1390.0, "cpu", 0.02))]
    assert chooser._another_pass(chooser._fitted(again), again, shape_counts(again), {k for k, _ in again}) is None
