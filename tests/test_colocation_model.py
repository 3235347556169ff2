"""Two jobs on one GPU, on constructed profiles and points: the pair's record from its points (r, the
verdict), the points kept out of every fit of one job, and the predictor (the GPU's time shared out,
the fitted terms, held-out error and the ranges)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sizer.model import group_points
from sizer.model.colocation import (
    MIN_PAIRS_FOR_RANGE,
    ColocationModel,
    fit_colocation,
    gpu_share_factor,
    held_out,
    predicted_verdict,
)
from sizer.model.pairs import JobProfile, PairRecord, pair_json, pair_records, shared_is_faster, time_shared_over_apart
from sizer.points import Point, parse_points_csv, write_points_csv

SHARE = "8vcpu-32gib-local-nvme/time"


def job_point(job: str, rate: float, partner: str = "", *, gpu: float | None = 50.0, cpu: float = 0.5,
              status: str = "ok", share_of: str = SHARE, mem: float | None = 10.0) -> Point:
    return Point(workload=job.split(":")[0], vcpus=4, ram_gib=16.0, disk_class="local-nvme", throughput=rate,
                 unit="images/s", status=status, profile="gpu", gpu_util_pct=gpu, cpu_util_per_vcpu=cpu,
                 gpu_mem_peak_gib=mem, gpu_model="NVIDIA H200", input="files", job=job, partner=partner,
                 share_of=share_of, host_id=1)


def pair_points(a: str, b: str, alone: tuple[float, float], shared: tuple[float, float], **kw) -> list[Point]:
    return [job_point(a, alone[0], **kw), job_point(b, alone[1], **kw), job_point(a, shared[0], b, **kw),
            job_point(b, shared[1], a, **kw)]


# ------------------------------------------------------------------ the pair's record
def test_a_pairs_record_holds_each_jobs_slowdown_and_the_verdict():
    (record,) = pair_records(pair_points("ptb-lstm-train", "resnet50-train", (1000.0, 3000.0), (800.0, 2000.0)))
    assert record.jobs == ("ptb-lstm-train", "resnet50-train") and record.sharing == "time"
    assert record.slowdowns == pytest.approx((1.25, 1.5))
    assert (record.instance_vcpus, record.instance_ram_gib) == (8, 32.0)
    # 1/1.25 + 1/1.5 = 1.47 > 1: shared, the pair ends at (1 + 1.25 - 1.25/1.5) / 2 = 71% of one after the other.
    assert record.shared_faster is True
    assert time_shared_over_apart(1.25, 1.5) == pytest.approx((1 + 1.25 - 1.25 / 1.5) / 2)
    as_json = pair_json(record)
    assert as_json["r_ab"] == 1.25 and as_json["r_ba"] == 1.5 and as_json["combined_progress"] == pytest.approx(1.467, abs=1e-3)
    assert as_json["verdict"].startswith("shared is faster")


def test_the_verdict_follows_the_rule_at_both_sides_of_it():
    assert shared_is_faster(1.9, 1.9) and not shared_is_faster(2.1, 2.1)
    assert time_shared_over_apart(2.0, 2.0) == pytest.approx(1.0)  # the boundary: as long as one after the other
    (slow,) = pair_records(pair_points("a", "b", (1000.0, 1000.0), (400.0, 450.0)))
    assert slow.shared_faster is False and pair_json(slow)["verdict"].startswith("one after the other is faster")


def test_a_pair_of_one_job_twice_takes_both_measurements_and_one_alone():
    points = [job_point("cpu-spin", 100.0), job_point("cpu-spin", 60.0, "cpu-spin"), job_point("cpu-spin", 40.0, "cpu-spin")]
    (record,) = pair_records(points)
    assert record.jobs == ("cpu-spin", "cpu-spin") and record.slowdowns == pytest.approx((2.0, 2.0))


def test_a_failed_job_leaves_the_pair_without_a_verdict_and_says_why():
    points = pair_points("a", "b", (100.0, 100.0), (80.0, 70.0))
    points[3] = dataclasses.replace(points[3], status="timeout", throughput=0.0)
    (record,) = pair_records(points)
    assert record.slowdowns[1] is None and record.shared_faster is None
    assert "b beside a: timeout" in pair_json(record)["verdict"]


def test_shared_points_stay_out_of_the_fit_of_one_job_and_round_trip_through_points_csv(tmp_path):
    solo = Point(workload="a", vcpus=4, ram_gib=16.0, disk_class="local-nvme", throughput=90.0, unit="images/s")
    points = pair_points("a", "b", (100.0, 100.0), (80.0, 70.0)) + [solo]
    assert group_points(points) == {"a": [solo]}
    write_points_csv(points, tmp_path / "p.csv")
    again = parse_points_csv((tmp_path / "p.csv").read_text())
    assert [(p.job, p.partner, p.share_of) for p in again] == [(p.job, p.partner, p.share_of) for p in points]
    assert pair_records(dataclasses.replace(p, host_id=1) for p in again)[0].slowdowns == pytest.approx((100 / 80, 100 / 70))


# ------------------------------------------------------------------ the predictor
def profile(job: str, gpu: float | None, cpu: float = 0.5, copy: float | None = None, rate: float = 1000.0) -> JobProfile:
    return JobProfile(job=job, workload=job, unit="images/s", throughput=rate, vcpus=4, gpu_busy=gpu, cpu_busy=cpu,
                      copy_gbps=copy)


def test_the_gpus_time_is_shared_out_max_min_fair():
    assert gpu_share_factor(0.4, 0.5) == 1.0  # both fit: no one waits for the GPU's time
    assert gpu_share_factor(1.0, 0.3) == pytest.approx(1 / 0.7)  # the big job gets what the small one leaves
    assert gpu_share_factor(0.3, 1.0) == 1.0  # the small job asks for less than half: it gets it
    assert gpu_share_factor(0.8, 0.9) == pytest.approx(1.6)  # both ask for more than half: half each
    assert gpu_share_factor(None, 0.9) == 1.0  # no GPU measured: no share of it to wait for


def record_from(a: JobProfile, b: JobProfile, r_ab: float, r_ba: float, sharing: str = "time") -> PairRecord:
    return PairRecord(jobs=(a.job, b.job), share_of=f"8vcpu-32gib-local-nvme/{sharing}", profile="gpu", host_id=1,
                      instance_vcpus=8, instance_ram_gib=32.0, disk_class="local-nvme",
                      shared=(a.throughput / r_ab, b.throughput / r_ba), alone=(a, b), units=("images/s", "images/s"))


KAPPA, GAMMA = 0.2, 0.1


def truth(a: JobProfile, b: JobProfile) -> float:
    """The model's own form with known coefficients: what a fit of it must recover."""
    return gpu_share_factor(a.gpu_busy, b.gpu_busy) * (1 + KAPPA * b.gpu_busy + GAMMA * b.cpu_busy)


PROFILES = [profile("a", 0.9, 0.9), profile("b", 0.3, 0.2), profile("c", 0.6, 0.7), profile("d", 0.2, 0.95),
            profile("e", 0.5, 0.1)]


def measured(pairs: list[tuple[int, int]], noise: tuple[float, ...] = ()) -> list[PairRecord]:
    out = []
    for n, (i, j) in enumerate(pairs):
        a, b = PROFILES[i], PROFILES[j]
        factor = noise[n] if noise else 1.0
        out.append(record_from(a, b, truth(a, b) * factor, truth(b, a) / factor))
    return out


def test_the_fit_recovers_the_coefficients_it_was_made_with_and_predicts_a_pair_not_measured():
    records = measured([(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (0, 4)])
    model = fit_colocation(records, "time")
    assert model.pairs == 6 and dict(model.coefficients) == pytest.approx({"gpu": KAPPA, "cpu": GAMMA}, abs=1e-6)
    assert model.mean_error == pytest.approx(0.0, abs=1e-6)  # each pair held out is predicted exactly
    unmeasured = model.predict(PROFILES[1], PROFILES[3])
    assert unmeasured.slowdown == pytest.approx(truth(PROFILES[1], PROFILES[3]))
    assert unmeasured.low == pytest.approx(unmeasured.slowdown) == pytest.approx(unmeasured.high)
    assert "fitted on 6 measured pair(s)" in unmeasured.basis


def test_held_out_error_and_the_range_come_from_the_pairs_left_out():
    records = measured([(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (0, 4)], noise=(1.1, 0.95, 1.05, 0.9, 1.0, 1.08))
    model = fit_colocation(records, "time")
    errors = held_out(records, "time")
    assert len(errors) == 12 and {h.pair for h in errors} == {r.key for r in records}
    assert model.mean_error == pytest.approx(sum(abs(h.error) for h in errors) / 12)
    assert 0.01 < model.mean_error < 0.2
    low, high = model.ratio_range
    assert low == pytest.approx(min(h.measured / h.predicted for h in errors))
    assert high == pytest.approx(max(h.measured / h.predicted for h in errors))
    guess = model.predict(PROFILES[1], PROFILES[3])
    assert guess.low == pytest.approx(guess.slowdown * low) and guess.high == pytest.approx(guess.slowdown * high)


def test_without_a_measured_pair_the_model_is_the_gpus_time_alone_with_its_bounds():
    model = fit_colocation([], "time")
    assert model.pairs == 0 and model.coefficients == () and model.ratio_range is None
    big, small = profile("big", 1.0), profile("small", 0.3)
    guess = model.predict(big, small)
    assert guess.slowdown == pytest.approx(1 / 0.7) == guess.low  # the GPU's time shared out, nothing more
    assert guess.high == pytest.approx(1 / 0.7 * 1.3)  # up to every busy second of the partner's
    assert "no time-shared pair measured" in guess.basis


def test_too_few_pairs_give_the_bounds_as_range_and_other_sharing_modes_are_fitted_apart():
    records = measured([(0, 1)]) + [record_from(PROFILES[2], PROFILES[3], 3.0, 3.0, sharing="mps")]
    model = fit_colocation(records, "time")
    assert model.pairs == 1 < MIN_PAIRS_FOR_RANGE and model.ratio_range is None
    assert fit_colocation(records, "mps").pairs == 1
    guess = model.predict(PROFILES[2], PROFILES[4])
    assert guess.low <= guess.slowdown <= guess.high


def test_a_term_some_profile_lacks_is_left_out_of_the_fit():
    with_copy = [dataclasses.replace(p, copy_gbps=1.0 + i) for i, p in enumerate(PROFILES)]
    records = [record_from(with_copy[0], with_copy[1], 1.3, 1.1), record_from(PROFILES[2], PROFILES[3], 1.4, 1.2)]
    assert "copy" not in dict(fit_colocation(records, "time").coefficients)
    full = [record_from(with_copy[0], with_copy[1], 1.3, 1.1), record_from(with_copy[2], with_copy[3], 1.4, 1.2)]
    assert "copy" in dict(fit_colocation(full, "time").coefficients)


def test_the_predicted_verdict_is_open_where_the_ranges_straddle_the_rule():
    model = ColocationModel("time", (), 0, ())
    sure = model.predict(profile("a", 0.3), profile("b", 0.3))
    assert predicted_verdict(sure, sure) == "yes"  # at most 1.3x each: 1/1.3 + 1/1.3 > 1
    busy = model.predict(profile("a", 1.0), profile("b", 1.0))
    assert (busy.low, busy.high) == pytest.approx((2.0, 4.0)) and predicted_verdict(busy, busy) == "no"
    edge = model.predict(profile("a", 0.9), profile("b", 0.9))  # 1.8x to 3.4x
    assert predicted_verdict(edge, edge) == "open"


def test_the_benchmark_prints_the_held_out_error_of_a_stores_pairs(benchmark, tmp_path, capsys):
    points = []
    for i, j in [(0, 1), (0, 2), (1, 2), (2, 3)]:
        a, b = PROFILES[i], PROFILES[j]
        for prof, partner, r in ((a, b, truth(a, b)), (b, a, truth(b, a))):
            points.append(job_point(prof.job, 1000.0, gpu=100 * prof.gpu_busy, cpu=prof.cpu_busy))
            points.append(job_point(prof.job, 1000.0 / r, partner.job, gpu=100 * prof.gpu_busy, cpu=prof.cpu_busy))
    write_points_csv(points, tmp_path / "p.csv")
    module = benchmark("colocation_error")
    assert module.main(["--input", str(tmp_path / "p.csv"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["time"]
    assert result["pairs"] == 4 and len(result["held_out"]) == 8
    assert result["mean_error"] == pytest.approx(0.0, abs=1e-6) and result["meets_goal"] is True
    assert module.main(["--store", str(tmp_path / "none.sqlite")]) == 2
