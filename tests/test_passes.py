"""Shapes measured in several passes (`sizer sweep --passes`): the plan's order, one median figure
per shape for the model and the report, and a real sweep of two passes in slices."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import statistics
from pathlib import Path

import pytest
from simulate import simulate_points

from sizer.errors import SizerError
from sizer.points import Point, combine_passes
from sizer.shapes import MAX_PASSES, build_plan


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def _plan(passes: int):
    return build_plan([("resnet50-train", "imagenet", None, {})], vcpus=[1, 2, 4], ram_gib=[4, 8],
                      disks=["local-nvme", "standard"], profile="cpu-small", passes=passes)


def test_every_pass_measures_every_shape_in_another_order():
    plan = _plan(3)
    ceiling, rest = plan[0], plan[1:]
    assert ceiling.ceiling and sum(p.ceiling for p in plan) == 1  # the GPU-alone point is measured once
    grid = [p.shape for p in rest if p.pass_no == 1]
    assert len(grid) == 12 and len(rest) == 36
    by_pass = {n: [p.shape for p in rest if p.pass_no == n] for n in (1, 2, 3)}
    assert [n for n in (p.pass_no for p in rest)] == sorted(p.pass_no for p in rest)  # pass after pass
    assert by_pass[2] == list(reversed(by_pass[1]))
    # Not in grid order (disk, RAM, vCPUs): no disk class gets a stretch of the sweep to itself.
    in_grid_order = sorted(by_pass[1], key=lambda s: (["local-nvme", "standard"].index(s.disk_class), s.ram_gib, s.vcpus))
    assert sorted(by_pass[1], key=str) == sorted(in_grid_order, key=str) and by_pass[1] != in_grid_order
    first_half = {s.disk_class for s in by_pass[1][:6]}
    assert first_half == {"local-nvme", "standard"}
    assert sorted(by_pass[3], key=str) == sorted(by_pass[1], key=str) and by_pass[3] not in (by_pass[1], by_pass[2])
    assert [p.key for p in _plan(3)] == [p.key for p in plan]  # the same order again: a resume finds its points
    keys = [p.key for p in plan]
    assert len(set(keys)) == len(keys)
    assert [p.key for p in plan if p.pass_no == 1] == [p.key for p in _plan(1)]  # one pass: keys as before
    assert all(p.key.endswith(f"#p{p.pass_no}") and f"(pass {p.pass_no})" in p.label() for p in rest if p.pass_no > 1)


@pytest.mark.parametrize("passes", [0, MAX_PASSES + 1])
def test_passes_out_of_range_are_refused(passes):
    with pytest.raises(SizerError, match="--passes wants 1 to"):
        _plan(passes)


def test_a_bad_passes_option_exits_2_before_any_work(cli, tmp_path):
    code, out, err = cli("sweep", "--workloads", "cpu-spin", "--passes", "0", "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and err.strip() == "sizer: error: --passes wants 1 to 9 measurements of each shape, got 0"
    assert not (tmp_path / "s.sqlite").exists()


def _point(rate: float, status: str = "ok", vcpus: int = 4, calibration: float | None = 300.0,
           pass_no: int = 1) -> Point:
    return Point("w", vcpus, 8.0, "local-nvme", rate, "images/s", status=status, calibration_ips=calibration,
                 pass_no=pass_no)


def test_a_shape_measured_several_times_stands_at_its_median():
    slow, mid, fast = _point(800.0), _point(1000.0), _point(1050.0)
    other = _point(1900.0, vcpus=8)
    combined = combine_passes([slow, other, mid, fast])
    assert len(combined) == 2
    shape = next(p for p in combined if p.vcpus == 4)
    assert shape.throughput == 1000.0 and shape.pass_rates == (800.0, 1000.0, 1050.0)
    assert shape.pass_spread == pytest.approx(0.25)
    assert next(p for p in combined if p.vcpus == 8) is other  # measured once: unchanged
    assert mid.throughput == 1000.0 and mid.pass_rates == ()  # the measurements are not modified
    again = combine_passes(combined)
    assert [(p.vcpus, p.throughput) for p in again] == [(p.vcpus, p.throughput) for p in combined]

    even = combine_passes([_point(900.0), _point(1100.0)])
    assert len(even) == 1 and even[0].throughput == 1000.0  # the median of the two
    failed = combine_passes([_point(0.0, status="timeout"), _point(900.0), _point(0.0, status="oom")])
    assert len(failed) == 1 and failed[0].throughput == 900.0 and failed[0].pass_failed == 2
    assert len(combine_passes([_point(0.0, status="oom"), _point(0.0, status="oom")])) == 2  # nothing to combine
    # Two hosts (their own CPU calibrations) measuring one shape stay two points.
    assert len(combine_passes([_point(900.0, calibration=300.0), _point(1000.0, calibration=350.0)])) == 2


TRUTH = {"gpu_ceiling": 4000.0, "per_vcpu": 300.0, "usl_sigma": 0.02, "usl_kappa": 0.0,
         "bytes_per_sample": 0.11, "footprint_gib": 6.0, "dataset_gib": 5.5}
DISKS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}


def _three_passes(speed) -> list[Point]:
    """Three simulated passes of a 30-shape grid; `speed(pass_index, point_index, point)` scales each
    measurement (the host's moment)."""
    passes = []
    for n in range(3):
        points = simulate_points("w", TRUTH, (2, 4, 8, 12, 16), DISKS, (8.0, 32.0), noise=0.01, seed=n)
        passes.extend(dataclasses.replace(p, throughput=p.throughput * speed(n, i, p), pass_no=n + 1)
                      for i, p in enumerate(points))
    return passes


def _held_out(bench, points: list[Point]) -> dict:
    rows = bench.evaluate(combine_passes(points))
    return next(r for r in rows if r["method"] == "leave-one-shape-out")


def test_the_median_of_three_passes_takes_a_slow_moment_out_of_the_held_out_error(tmp_path, benchmark):
    """A host that slows down for a while: in each pass a different stretch of the grid runs 25%
    slow. One pass alone carries those points into the held-out error; the median of three does not."""
    passes = _three_passes(lambda n, i, p: 0.75 if i % 3 == n else 1.0)  # each pass's slow stretch
    bench = benchmark("model_accuracy")
    one = _held_out(bench, bench.first_passes(passes, 1))
    three = _held_out(bench, bench.first_passes(passes, 3))
    assert one["n"] == three["n"] == 30
    assert one["max_ape"] > 0.2 and three["max_ape"] < 0.06 and three["median_ape"] < 0.03
    with pytest.raises(SizerError, match="--passes wants 1 or more"):
        bench.first_passes(passes, 0)


def test_a_tiebreak_keeps_the_next_pass_only_where_the_first_passes_disagree(benchmark):
    bench = benchmark("model_accuracy")
    torn = [_point(1000.0), _point(1300.0, pass_no=2), _point(1100.0, pass_no=3)]
    agreed = [_point(1900.0, vcpus=8), _point(1950.0, vcpus=8, pass_no=2), _point(2500.0, vcpus=8, pass_no=3)]
    points, added = bench.tiebreak_passes(torn + agreed, 2, 0.1)
    assert added == 1 and torn[2] in points and agreed[2] not in points and len(points) == 5
    shape = next(p for p in combine_passes(points) if p.vcpus == 4)
    assert shape.throughput == 1100.0  # the third measurement breaks the tie: the median of three
    assert bench.tiebreak_passes(torn + agreed, 2, 0.5)[1] == 0  # 30% apart is within a 50% spread
    with pytest.raises(SizerError, match="--tiebreak wants a spread above 0"):
        bench.tiebreak_passes(torn, 2, 0.0)
    assert bench.main(["--tiebreak", "0.1", "--input", "nothing.csv"]) == 2  # refused before any reading


def test_refine_measures_again_the_shape_the_model_predicts_worst(benchmark):
    """One shape ran fast in both of its first two passes, by 25% and 10%: 14% apart, within a 20%
    tie-break, so the tie-break keeps it as it is; its held-out error singles it out, and its third
    measurement, at the host's usual speed, takes its median from the mean of the two to the lower."""
    fast_shape = (4, 8.0, "local-nvme")
    passes = _three_passes(lambda n, i, p: (1.25, 1.10, 1.0)[n] if (p.vcpus, p.ram_gib, p.disk_class) == fast_shape else 1.0)
    bench = benchmark("model_accuracy")
    assert bench.tiebreak_passes(passes, 2, 0.2)[1] == 0  # 14% apart: within the tie-break's spread
    refined, added = bench.refine_passes(passes, 2, 1)
    assert added == 1
    (third,) = [p for p in refined if p.pass_no == 3]
    assert (third.vcpus, third.ram_gib, third.disk_class) == fast_shape
    two, after = _held_out(bench, bench.first_passes(passes, 2)), _held_out(bench, refined)
    assert two["max_ape"] > 0.14 and after["max_ape"] < 0.12
    with pytest.raises(SizerError, match="--refine wants 1 or more"):
        bench.refine_passes(passes, 2, 0)
    assert bench.main(["--refine", "2", "--input", "nothing.csv"]) == 2  # no --passes: refused before reading


def test_worst_predicted_names_each_workloads_worst_shapes_at_their_median():
    """Two workloads, each with one shape measured fast in both passes: each workload's worst is
    that shape, standing at the median of its measurements, and its error is its held-out one."""
    from sizer.diskclasses import load_disk_classes
    from sizer.model import worst_predicted

    def fast(shape, name):
        points = _three_passes(lambda n, i, p: 1.3 if (p.vcpus, p.ram_gib, p.disk_class) == shape else 1.0)
        return [dataclasses.replace(p, workload=name) for p in points if p.pass_no <= 2]

    points = fast((4, 8.0, "local-nvme"), "a") + fast((8, 32.0, "ssd"), "b")
    table = load_disk_classes()
    worst = worst_predicted(points, table, 1)
    assert sorted((p.workload, p.vcpus, p.ram_gib, p.disk_class) for p, _ in worst) == [
        ("a", 4, 8.0, "local-nvme"), ("b", 8, 32.0, "ssd")]
    for point, error in worst:
        assert point.pass_rates and point.throughput == statistics.median(point.pass_rates)
        assert 0.15 < error < 0.4  # 30% fast: the fit without it predicts the host's usual speed
    three = worst_predicted(points, table, 3)
    assert len(three) == 6 and [p.workload for p, _ in three] == ["a"] * 3 + ["b"] * 3
    errors_a = [e for p, e in three if p.workload == "a"]
    assert errors_a == sorted(errors_a, reverse=True) and errors_a[0] > 2 * errors_a[1]
    with pytest.raises(SizerError, match="--refine wants 1 or more"):
        worst_predicted(points, table, 0)


@pytest.mark.parametrize("args, message", [
    (["--refine", "-1"], "--refine wants 0 (off) or more shapes per workload, got -1"),
    (["--refine", "1", "--passes", str(MAX_PASSES)],
     f"--refine measures a pass beyond --passes: give --passes below {MAX_PASSES}, got {MAX_PASSES}"),
])
def test_a_bad_refine_option_exits_2_before_any_work(cli, tmp_path, args, message):
    code, out, err = cli("sweep", "--workloads", "cpu-spin", *args, "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and err.strip() == f"sizer: error: {message}"
    assert not (tmp_path / "s.sqlite").exists()


def test_the_dry_run_counts_refine_in_its_estimate(cli, tmp_path):
    base = ["sweep", "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", "512M", "--disks", "local-nvme",
            "--budget", "2", "--no-calibrate", "--dry-run", "--json", "--store", str(tmp_path / "s.sqlite")]
    plain = json.loads(cli(*base)[1])
    refined = json.loads(cli(*base, "--refine", "5")[1])
    assert refined["refine"] == {"shapes_per_workload": 5, "at_most": 2}  # a grid of two shapes
    per_point = plain["points"][0]["estimated_s"]
    assert refined["estimated_seconds"] == pytest.approx(plain["estimated_seconds"] + 2 * per_point, abs=0.2)
    assert plain["refine"] is None and len(refined["points"]) == len(plain["points"])


@pytest.fixture
def points_take_a_minute(monkeypatch):
    """The sweep's clock (the `time.monotonic` of sizer.sweep's execute and state) in fake time: the
    real clock plus 60 s for each point measured. A slice of --max-time 90s then has time for its
    first point (its estimate of a few seconds fits) and for no other, however fast the host."""
    import time
    import types

    from sizer.sweep import execute, state

    offset = [0.0]
    clock = types.SimpleNamespace(monotonic=lambda: time.monotonic() + offset[0], time=time.time)
    monkeypatch.setattr(execute, "time", clock)
    monkeypatch.setattr(state, "time", clock)
    measure = state.measure_point

    def measure_a_minute(*args, **kwargs):
        run = measure(*args, **kwargs)
        offset[0] += 60.0
        return run

    monkeypatch.setattr(state, "measure_point", measure_a_minute)


def _small_sweep(tmp_path: Path, ram: str, *options: str) -> list[str]:
    """`sizer sweep` arguments of a real cpu-spin sweep at 1 and 2 vCPUs, 1 s a point, in tmp_path."""
    return ["sweep", "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", ram, "--disks", "local-nvme",
            "--budget", "1", *options, "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
            "--data", str(tmp_path / "data"), "--no-calibrate", "--json"]


@pytest.mark.cgroup
def test_a_refined_sweep_measures_its_worst_shape_again_once_even_across_slices(cli, tmp_path, points_take_a_minute):
    """A real sweep cut by its time limit before the refine step: the resumed run finishes the
    pass, chooses the worst-predicted shape and measures its second pass; a third run chooses the
    same shape from the same stored pass and measures nothing."""
    args = _small_sweep(tmp_path, "512M,1G", "--refine", "1")
    code, out, err = cli(*args, "--max-time", "90s")
    assert code == 0, err
    first = json.loads(out)
    assert len(first["points"]) == 1 and first["left"] == 3  # one point of four, then no time
    assert "refine" not in first  # the pass is not done: nothing chosen yet
    code, out, err = cli(*args, "--resume")
    assert code == 0, err
    second = json.loads(out)
    assert "left" not in second and len(second["refine"]) == 1
    (chosen,) = second["refine"]
    assert chosen["key"].endswith("#p2") and chosen["held_out_error"] > 0
    again = [p for p in second["points"] if p["pass"] == 2]
    assert [p["key"] for p in again] == [chosen["key"]] and not again[0]["stored"] and again[0]["status"] in ("ok", "noisy")
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    keys = [k for (k,) in conn.execute("SELECT key FROM points")]
    assert len(keys) == 5 and chosen["key"] in keys
    assert conn.execute("SELECT finished IS NOT NULL FROM sweeps").fetchone() == (1,)
    code, out, err = cli(*args, "--resume")
    assert code == 0, err
    third = json.loads(out)
    assert third["refine"] == second["refine"]  # the same shape, from the same stored first pass
    assert all(p["stored"] for p in third["points"]) and third["skipped"] == 5
    assert conn.execute("SELECT count(*) FROM points").fetchone() == (5,)
    (wl,) = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"]
    assert sorted(len(p.get("pass_rates") or [1]) for p in wl["points"]) == [1, 1, 1, 2]


def test_the_report_shows_the_median_and_the_range_of_a_shape(tmp_path):
    from sizer.report import build_context, render_html

    points = []
    for n, factor in enumerate((1.0, 0.8, 1.05), start=1):
        for p in simulate_points("w", TRUTH, (2, 4, 8, 16), {"local-nvme": None}, (32.0,), seed=n, gpu_model="H200"):
            points.append(dataclasses.replace(p, throughput=p.throughput * factor, pass_no=n))
    context = build_context(points, gpu="H200")
    (wl,) = context["workloads"]
    real = [p for p in wl["points"] if p["input"] != "synthetic"]
    assert len(real) == 4 and all(len(p["pass_rates"]) == 3 for p in real)
    assert all(p["measured"] == pytest.approx(sorted(p["pass_rates"])[1]) for p in real)
    assert wl["model"]["n_points"] == len(wl["points"])  # fitted once per shape
    html = render_html(context)
    assert html.count("median of 3:") == 5  # four shapes and the GPU-alone point


@pytest.mark.cgroup
def test_a_sweep_of_two_passes_in_slices_stores_both_and_reports_one_figure_per_shape(cli, tmp_path,
                                                                                      points_take_a_minute):
    args = _small_sweep(tmp_path, "512M", "--passes", "2")
    code, out, err = cli(*args, "--max-time", "90s")
    assert code == 0, err
    first = json.loads(out)
    measured_first = [p for p in first["points"] if not p["stored"]]
    assert len(measured_first) == 1 and first["left"] == 3
    code, out, err = cli(*args, "--resume")
    assert code == 0, err
    second = json.loads(out)
    assert "left" not in second and len(second["points"]) == 4
    assert [(p["vcpus"], p["pass"]) for p in second["points"]] == [(1, 1), (2, 1), (2, 2), (1, 2)]
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    rows = conn.execute("SELECT key, json_extract(result, '$.extra.pass') FROM points ORDER BY id").fetchall()
    assert len(rows) == 4 and [r[1] for r in rows] == [None, None, 2, 2]
    assert {r[0] for r in rows if r[1] == 2} == {"cpu-spin/cpu-small/2vcpu-0.5gib-local-nvme#p2",
                                                  "cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme#p2"}
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    (wl,) = results["workloads"]
    assert [len(p["pass_rates"]) for p in wl["points"]] == [2, 2]
    rates = {p["vcpus"]: p["pass_rates"] for p in wl["points"]}
    assert all(min(r) > 0 for r in rates.values())
    csv_rows = (tmp_path / "out" / "points.csv").read_text().strip().splitlines()
    assert len(csv_rows) == 1 + 4  # every measurement, not the medians
