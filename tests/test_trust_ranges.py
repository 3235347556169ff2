"""The range rules: a prediction at a vCPU count nobody measured carries the model's own held-out
error there, the knee range widens with the host's speed over the sweep, and it is open above where
the measurements do not settle the plateau."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_trust import _context, _cpu_bound_points, _passes, _random_points, _Sweep, row, shape_points

from sizer.diskclasses import load_disk_classes
from sizer.model import fit_points
from sizer.model.level_error import LevelErrors, conformal_band, level_errors, vcpu_band, widen
from sizer.model.types import Prediction
from sizer.model.uncertainty import band_moves, fit_draws, host_speeds, knee_range, model_range
from sizer.points import combine_passes as combine
from sizer.sizing import MeasuredKnee, sweep_host_speeds
from sizer.sizing.knee import LevelRate, open_reason


@pytest.fixture(scope="module")
def disk_classes():
    return load_disk_classes()


# ---------------------------------------------------------------------------- the band's rule
def test_the_band_is_the_conformal_rank_of_the_held_out_errors():
    six = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]
    assert conformal_band(six, 0.9) == 0.06  # k = ceil(7 * 0.8) = 6: the largest
    assert conformal_band(six, 0.7) == 0.03  # k = ceil(7 * 0.4) = 3
    assert conformal_band(six + [0.07] * 6, 0.9) == 0.07  # k = ceil(13 * 0.8) = 11 of 12
    assert conformal_band([0.1, 0.2], 0.9) == 0.2  # too few for the level asked: the largest
    assert conformal_band(six, 0.5) == 0.0 and conformal_band([], 0.9) == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.5, 0.5), min_size=1, max_size=20), st.floats(0.51, 0.99), st.floats(0.51, 0.99))
def test_the_band_lies_among_the_errors_and_grows_with_confidence(errors, a, b):
    low, high = sorted((a, b))
    magnitudes = [abs(e) for e in errors]
    assert min(magnitudes) <= conformal_band(errors, low) <= conformal_band(errors, high) <= max(magnitudes)


def test_the_band_comes_from_the_nearest_measured_level_on_each_side():
    errors = LevelErrors({2: (0.01,), 4: (0.02,), 8: (0.10,), 16: (0.30,)}, {2: (0.05,), 8: (0.07,)})
    assert errors.band(4, 0.9) == 0.0  # measured: the measurements speak
    assert errors.band(3, 0.9) == 0.02 and errors.band(6, 0.9) == 0.10 and errors.band(12, 0.9) == 0.30
    assert errors.band(24, 0.9) == 0.30 and errors.band(1, 0.9) == 0.01  # beyond: the outermost level alone
    assert errors.band(16, 0.9, cpu=True) == 0.07 and errors.band(4, 0.9, cpu=True) == 0.07


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 1e4), st.floats(0.0, 0.9), st.floats(0.0, 0.9), st.floats(0.0, 0.9), st.floats(0.0, 0.9))
def test_widening_adds_in_quadrature_and_never_narrows(point, below, above, down, up):
    low, high = point * (1 - below), point * (1 + above)
    wide_low, wide_high = widen(point, low, high, down, up)
    assert 0.0 <= wide_low <= low and wide_high >= high
    assert wide_high == pytest.approx(point * (1 + math.hypot(above, up)))
    assert wide_low == pytest.approx(max(point * (1 - math.hypot(below, down)), 0.0), abs=1e-9)


# ---------------------------------------------------------------------------- at a vCPU count nobody measured
def _unmeasured_twelve(disk_classes):
    """CPU-bound below 1,000 images/s, measured at 2, 4, 8 and 16 vCPUs but not at 12."""
    rates = {(v, 32.0, disk): _passes(min(1000.0, 70.0 * v * (1 - 0.01 * v)), 0.02)
             for v in (2, 4, 8, 16) for disk in ("local-nvme", "ssd")}
    return fit_points(shape_points(rates), disk_classes)["w"]


def test_a_prediction_at_an_unmeasured_level_carries_the_models_held_out_error(disk_classes):
    fit = _unmeasured_twelve(disk_classes)
    errors = level_errors(fit)
    assert sorted(errors.errors) == [2, 4, 8, 16] and all(len(e) == 2 for e in errors.errors.values())
    band = vcpu_band(fit, 12, 0.9)
    assert band == conformal_band(errors.errors[8] + errors.errors[16], 0.9) and band > 0
    draws = fit_draws(fit)
    predicted = fit.predict(12, 32.0, None)
    plain, banded = model_range(draws, predicted, 0.9), model_range(draws, predicted, 0.9, band)
    assert banded[0] < plain[0] <= plain[1] < banded[1]


def test_at_a_measured_level_there_is_no_band_and_no_refit(disk_classes):
    fit = _unmeasured_twelve(disk_classes)

    def refused(leave):
        raise AssertionError("a measured level needs no refit")

    fit.refit_without = refused
    assert vcpu_band(fit, 8, 0.9) == 0.0 and vcpu_band(fit, 16, 0.9, cpu=True) == 0.0


def test_the_band_moves_the_cpu_term_and_a_fitted_ceiling_but_not_a_measured_one(disk_classes):
    draws = dataclasses.replace(fit_draws(_unmeasured_twelve(disk_classes)), sharpness=0.0)
    headroom = Prediction(1000.0, "gpu", {"gpu": 1000.0, "cpu": 2000.0})
    assert band_moves(dataclasses.replace(draws, ceiling_measured=True), headroom, 0.2) == (0.0, 0.0)
    assert band_moves(dataclasses.replace(draws, ceiling_measured=False), headroom, 0.2) == pytest.approx((0.2, 0.2))
    cpu_bound = Prediction(800.0, "cpu", {"gpu": 1000.0, "cpu": 800.0})
    down, up = band_moves(draws, cpu_bound, 0.2)
    assert down == pytest.approx(0.2) and up == pytest.approx(0.2)  # 960 stays below the ceiling


def test_a_decision_holds_a_fitted_ceiling_where_the_band_moves_only_the_cpu_term(disk_classes):
    """A share of the ceiling: a shape whose CPU term stays above the ceiling when the band moves it
    down is at 100% of whatever the ceiling is, fitted or measured."""
    draws = dataclasses.replace(fit_draws(_unmeasured_twelve(disk_classes)), sharpness=0.0, ceiling_measured=False)
    headroom = Prediction(1000.0, "gpu", {"gpu": 1000.0, "cpu": 2000.0})
    assert band_moves(draws, headroom, 0.2, hold_ceiling=True) == (0.0, 0.0)
    near = Prediction(1000.0, "gpu", {"gpu": 1000.0, "cpu": 1100.0})
    down, up = band_moves(draws, near, 0.2, hold_ceiling=True)
    assert down == pytest.approx(1 - 880.0 / 1000.0) and up == 0.0  # the CPU term moved below the held ceiling


def test_a_model_figure_beyond_the_measured_levels_never_falls_below_the_measured_floor(disk_classes):
    from sizer.model.decision import Judge, shape_figure
    from sizer.model.evidence import disk_caps, evidence_for

    rates = {(v, 32.0, "local-nvme"): _passes(min(1000.0, 150.0 * v)) for v in (2, 4, 8)}
    fit = fit_points(shape_points(rates), disk_classes)["w"]
    judge = Judge.of(fit, disk_classes, 0.05, 0.9)
    evidence = evidence_for(judge.draws.shapes, judge.caps, 16, 64.0,
                            disk_caps(fit, disk_classes, "local-nvme"), "local-nvme")
    predicted = fit.predict(16, 64.0, fit.disk_mbps("local-nvme"))
    wide = shape_figure(fit, judge.draws, predicted, evidence, True, 0.9, band=0.5)
    floor = shape_figure(fit, judge.draws, predicted, evidence, True, 0.9, band=0.0)
    assert wide.basis == "model above measured floor" and wide.share_pessimistic >= 0.95
    assert wide.share_pessimistic == pytest.approx(floor.share_pessimistic, abs=0.01)


@settings(max_examples=30, deadline=None)
@given(st.data(), st.floats(0.0, 1.0))
def test_no_band_takes_a_figure_below_the_measurements_it_contains(data, band):
    from sizer.model.decision import Judge, shape_figure
    from sizer.model.evidence import disk_caps, evidence_for
    from sizer.model.uncertainty import anchored_range

    table = load_disk_classes()
    fit = fit_points(_random_points(data.draw), table)["w"]
    judge = Judge.of(fit, table, 0.05, 0.9)
    for vcpus in (4, 16, 24):
        evidence = evidence_for(judge.draws.shapes, judge.caps, vcpus, 64.0, disk_caps(fit, table, "local-nvme"),
                                "local-nvme")
        predicted = fit.predict(vcpus, 64.0, fit.disk_mbps("local-nvme"))
        wide = shape_figure(fit, judge.draws, predicted, evidence, True, 0.9, band)
        plain = shape_figure(fit, judge.draws, predicted, evidence, True, 0.9)
        assert wide.share_pessimistic <= plain.share_pessimistic + 1e-9
        assert wide.share_optimistic >= plain.share_optimistic - 1e-9
        if evidence is not None:
            floor = np.max(judge.draws.rates[:, list(evidence.contained)], axis=1)
            floor_end = min(anchored_range(evidence.figure, floor, 0.9)[0], wide.rate)
            assert wide.share_pessimistic >= min(max(floor_end / fit.ceiling, 0.0), 1.0) - 1e-9


# ---------------------------------------------------------------------------- the knee range
def test_the_knee_range_widens_with_the_hosts_speed_over_the_sweep(disk_classes):
    fit = fit_points(combine(_cpu_bound_points(100.0, seed=1)), disk_classes)["w"]
    steady = knee_range(fit, fit_draws(fit), 0.05, 0.9, 64.0, None, 64)
    swinging = host_speeds([[330.0, 320.0, 250.0, 325.0, 340.0, 240.0], [100.0]])
    assert swinging is not None and len(swinging) == 6 and np.median(swinging) == pytest.approx(1.0)
    moved = knee_range(fit, fit_draws(fit, host=swinging), 0.05, 0.9, 64.0, None, 64)
    assert moved.pessimistic < steady.pessimistic and moved.high > steady.high
    assert moved.low <= steady.low


def test_the_reports_knee_range_reads_the_timeline_of_its_sweeps(tmp_path):
    timeline = [{"at_s": 0.0, "ips": [330.0, 320.0], "median": 325.0, "spread": 0.03},
                {"at_s": 600.0, "ips": [240.0, 250.0], "median": 245.0, "spread": 0.04},
                {"at_s": 1200.0, "ips": [325.0, 335.0], "median": 330.0, "spread": 0.03}]
    sweeps = [_Sweep(1, {"ips_per_vcpu": 325.0, "timeline": timeline})]
    assert sweep_host_speeds(s.calibration for s in sweeps) == ((330.0, 320.0, 240.0, 250.0, 325.0, 335.0),)
    rows = [row("t-16", 16, 64.0, 2.0)]
    quiet = _context(_cpu_bound_points(100.0, seed=1), tmp_path, rows)["workloads"][0]["knee"]["range"]
    timed = _context(_cpu_bound_points(100.0, seed=1), tmp_path, rows, sweeps=sweeps)["workloads"][0]["knee"]["range"]
    assert timed["host_timeline"] and not quiet["host_timeline"]
    assert timed["cpu_speed_low"] < quiet["cpu_speed_low"] and timed["high"] > quiet["high"]


def _knee_row(by_vcpus: dict[int, float], bound: float = 950.0) -> MeasuredKnee:
    knee = next((v for v in sorted(by_vcpus) if by_vcpus[v] >= bound), None)
    best = max(by_vcpus, key=lambda v: by_vcpus[v])
    return MeasuredKnee("cpu", 1000.0, "the GPU ceiling", bound, knee, by_vcpus.get(knee) if knee else None, best,
                        by_vcpus[best], by_vcpus[best] / 1000.0, tuple(sorted(by_vcpus)),
                        tuple(LevelRate(v, t) for v, t in sorted(by_vcpus.items())))


def test_the_knee_is_open_above_where_the_measurements_do_not_settle_the_plateau():
    at_top = _knee_row({4: 400.0, 8: 800.0, 12: 900.0, 16: 990.0})
    early = _knee_row({2: 500.0, 4: 960.0, 8: 1000.0, 16: 1000.0})
    falling = _knee_row({8: 800.0, 12: 960.0, 16: 900.0})
    never = _knee_row({4: 400.0, 16: 900.0})
    assert not at_top.settled_at(0.93) and at_top.settled_at(1.0)
    assert early.settled_at(0.8) and not falling.settled_at(0.93)
    assert "first reach the plateau at their highest count, 16 vCPUs" in open_reason(16, 16, [at_top], 0.93)
    assert "would need 12.9" in open_reason(12, 16, [falling], 0.93)
    assert "did not reach the plateau by 16" in open_reason(20, 16, [never], 0.93)
    assert open_reason(4, 16, [early], 0.9) is None
    assert "model's pessimistic knee" in open_reason(20, 16, [early], 0.9)
    assert "model's pessimistic knee" in open_reason(None, 16, [early], 0.9)


def test_the_report_words_an_open_knee_range(tmp_path):
    from sizer.report import render_html

    def context(per_vcpu: float):
        rates = {(v, 32.0, "local-nvme"): _passes(min(1000.0, per_vcpu * v), 0.03) for v in (2, 4, 8, 12, 16)}
        return _context(shape_points(rates), tmp_path, [row("t-16", 16, 64.0, 2.0)])

    late, early = context(62.5), context(250.0)  # the plateau at 16 vCPUs, and from 4
    late_range, early_range = late["workloads"][0]["knee"]["range"], early["workloads"][0]["knee"]["range"]
    assert late_range["beyond_measured"] and late_range["measured_up_to"] == 16
    assert not early_range["beyond_measured"] and early_range["open_reason"] is None
    assert "to more than 16 vCPUs" in render_html(late) and "more than 16 vCPUs" not in render_html(early)


# ---------------------------------------------------------------------------- the benchmarks' verdicts
def test_a_replicate_knee_beyond_the_measured_counts_lies_in_a_range_open_above(benchmark):
    knees = benchmark("knee_ranges")
    open_range = {"low": 14, "high": 17, "beyond_measured": True, "measured_up_to": 16, "searched_up_to": 64}
    closed = {**open_range, "high": 16, "beyond_measured": False}
    assert knees.contains(open_range, None, 16) and knees.contains(open_range, 24, 24)
    assert knees.contains(open_range, 16, 16) and not knees.contains(open_range, 12, 16)
    assert not knees.contains(closed, None, 16) and knees.contains(closed, 15, 16)
    assert knees.range_text(open_range) == "14 to more than 16" and knees.range_text(closed) == "14 to 16"
    unreached = {**closed, "low": None, "high": None}
    assert knees.contains(unreached, None, 16) and not knees.contains(unreached, 16, 16)


def test_the_accuracy_benchmark_prints_each_held_out_level_and_the_acceptance(tmp_path, benchmark, capsys):
    from sizer.points import write_points_csv

    accuracy = benchmark("model_accuracy")
    rows = accuracy.held_out_levels(combine(_cpu_bound_points(100.0, seed=1)), confidence=0.9)
    assert all(r["band"] >= 0 and len(r["shapes"]) == r["n"] for r in rows)
    assert all(s["low"] <= s["predicted"] <= s["high"] for r in rows for s in r["shapes"])
    assert accuracy.acceptance([{"max_ape": 0.2, "inside": 4, "n": 4}]) == (False, True)
    csv_path = tmp_path / "points.csv"
    write_points_csv(_cpu_bound_points(100.0, seed=1), csv_path)
    assert accuracy.main(["--input", str(csv_path), "--hold", "vcpus"]) == 0
    out = capsys.readouterr().out
    assert "acceptance holds" in out or "acceptance FAILS" in out
    assert "measured" in out and "predicted" in out and "range" in out and "band" in out


def test_a_shape_measured_once_moves_as_far_as_the_measurements_lie_from_the_fit(disk_classes):
    # Passes scattered by about 3% around the curve, each with a sub-window spread of 2%: measured
    # once, a shape's figure ranges as the scatter does (10-90%: about 8%), not as its own window
    # (about 1.6%); measured three times, it ranges within its own passes.
    once = fit_points(combine(_cpu_bound_points(100.0, seed=5, passes=1)), disk_classes)["w"]
    draws = fit_draws(once)
    pool = np.concatenate([draws.measured[term] / np.median(draws.measured[term]) for term in ("cpu", "gpu")])
    scatter = float(np.subtract(*np.quantile(pool, [0.9, 0.1])))
    assert scatter > 0.05
    for j, shape in enumerate(draws.shapes):
        assert len(shape.rates) == 1 and shape.spread == pytest.approx(0.02)
        width = float(np.subtract(*np.quantile(draws.rates[:, j] / shape.median, [0.9, 0.1])))
        assert 0.6 * scatter < width < 1.6 * scatter
    thrice = fit_points(combine(_cpu_bound_points(100.0, seed=5, passes=3)), disk_classes)["w"]
    draws = fit_draws(thrice)
    for j, shape in enumerate(draws.shapes):
        assert len(shape.rates) == 3
        assert min(shape.rates) - 1e-9 <= draws.rates[:, j].min() and draws.rates[:, j].max() <= max(shape.rates) + 1e-9
