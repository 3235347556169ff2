"""The performance model: parameter recovery, leave-one-out error, prediction, degenerate inputs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from simulate import simulate_points

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.facts import with_facts
from sizer.model import Param, Prediction, cpu_scale, fit_points, group_points
from sizer.points import Point
from sizer.store_schema import epochs_of

DISKS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}
# A CPU-decoding input pipeline with visible contention, a disk that binds at the small RAM level.
TRUTH = {
    "gpu_ceiling": 2500.0,
    "per_vcpu": 400.0,
    "usl_sigma": 0.08,
    "usl_kappa": 0.004,
    "bytes_per_sample": 0.3,
    "footprint_gib": 4.0,
    "dataset_gib": 60.0,
}
GRID_VCPUS = (1, 2, 4, 8, 12, 16, 24, 32)
RAMS = (16.0, 48.0)


@pytest.fixture(scope="module")
def disk_classes():
    return load_disk_classes()


def _fit(points, disk_classes, **kw):
    fits = fit_points(points, disk_classes, **kw)
    assert list(fits) == ["w"]
    return fits["w"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_known_parameters_within_ten_percent(disk_classes, seed):
    """Acceptance: 2% noise, the sweep's grid; every parameter within 10%, LOO median <= 3%."""
    points = simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, noise=0.02, seed=seed)
    fit = _fit(points, disk_classes)
    for name, true in TRUTH.items():
        got = fit.params[name].value
        assert abs(got - true) / true <= 0.10, f"{name}: fitted {got:.4g}, true {true:.4g}"
    assert fit.params["gpu_ceiling"].source == "measured"
    for name in ("per_vcpu", "usl_sigma", "usl_kappa"):
        p = fit.params[name]
        assert p.source == "fit" and p.identifiable
        assert p.low is not None and p.low <= p.value <= p.high
    assert fit.params["disk_ssd_mbps"].value == 300 and fit.params["disk_ssd_mbps"].source == "disk-class"
    assert fit.params["disk_standard_mbps"].value == 140
    assert "disk_local-nvme_mbps" not in fit.params  # unthrottled, no device figure: never binding
    assert fit.loo_median_ape is not None and fit.loo_median_ape <= 0.03
    assert fit.loo_max_ape >= fit.loo_median_ape
    assert fit.n_points == len(points)
    assert len(fit.residuals) == len(points) - 1  # the synthetic-input point measures the ceiling
    # In-sample predictions follow the measurements within the noise.
    worst = max(abs(pred - p.throughput) / p.throughput for p, pred in fit.residuals)
    assert worst < 0.08


def test_fit_without_gpu_point_or_read_bytes_fits_them(disk_classes):
    """No synthetic-input point and no read-bytes figure: the ceiling and bytes/sample are fitted."""
    truth = dict(TRUTH, gpu_ceiling=2000.0)
    points = simulate_points("w", truth, GRID_VCPUS, DISKS, RAMS, noise=0.02, seed=3, synthetic=False,
                             measured=("footprint_gib", "dataset_gib"))
    fit = _fit(points, disk_classes)
    # The ceiling rests on the best measurement where the fitted plateau would lie below it.
    assert fit.ceiling >= max(p.throughput for p in points)
    assert abs(fit.ceiling - truth["gpu_ceiling"]) / truth["gpu_ceiling"] <= 0.05
    for name in ("per_vcpu", "bytes_per_sample"):
        p = fit.params[name]
        assert p.source == "fit"
        assert abs(p.value - truth[name]) / truth[name] <= 0.10, name
        assert p.low <= truth[name] <= p.high, f"{name}: 95% interval {p.low:.4g}..{p.high:.4g} misses the truth"
    # sigma and kappa trade off on this shorter CPU-bound range: their intervals still hold the truth.
    for name in ("usl_sigma", "usl_kappa"):
        p = fit.params[name]
        assert p.low <= truth[name] <= p.high
    assert fit.loo_median_ape <= 0.03


def test_fit_on_the_brief_grid_recovers_the_physical_parameters(disk_classes):
    """vCPU {1,2,4,8,12,16} x disks x 2 RAM levels, ceiling reached at 16 vCPUs."""
    truth = {"gpu_ceiling": 4678.0, "per_vcpu": 330.0, "usl_sigma": 0.02, "usl_kappa": 0.0015,
             "bytes_per_sample": 0.11, "footprint_gib": 4.0, "dataset_gib": 100.0}
    points = simulate_points("w", truth, (1, 2, 4, 8, 12, 16), DISKS, (16.0, 64.0), noise=0.02, seed=11)
    fit = _fit(points, disk_classes)
    assert abs(fit.params["per_vcpu"].value - 330) / 330 <= 0.10
    assert abs(fit.ceiling - 4678) / 4678 <= 0.10
    assert fit.loo_median_ape <= 0.03


def test_predict_names_the_binding_term(disk_classes):
    points = simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, noise=0.0, seed=0)
    fit = _fit(points, disk_classes)
    cpu = fit.predict(2, 48.0, None)
    assert isinstance(cpu, Prediction) and cpu.bottleneck == "cpu"
    assert cpu.throughput == pytest.approx(400 * 2 / (1 + 0.08 + 0.004 * 2), rel=0.02)
    gpu = fit.predict(16, 48.0, None)
    assert gpu.bottleneck == "cpu" or gpu.bottleneck == "gpu"
    # The USL peak is below the ceiling here, so a faster CPU reaches the GPU:
    fast = fit.predict(16, 48.0, None, cpu_scale=2.0)
    assert fast.bottleneck == "gpu" and fast.throughput == pytest.approx(fit.ceiling)
    disk = fit.predict(16, 16.0, 140.0)
    assert disk.bottleneck in ("disk", "memory") and "io" in disk.terms
    assert disk.throughput == pytest.approx(140 / (0.3 * (1 - 12 / 60)), rel=0.02)
    # More RAM caches the dataset: the same disk stops binding.
    cached = fit.predict(16, 80.0, 140.0)
    assert cached.throughput > disk.throughput and "io" not in cached.terms
    # Less RAM than the workload's footprint: killed by the memory limit.
    oom = fit.predict(4, 2.0, None)
    assert oom.throughput == 0 and oom.bottleneck == "memory"
    with pytest.raises(ValueError):
        fit.predict(0, 16.0, None)


def test_io_bound_is_memory_when_more_ram_lifts_it_and_disk_when_not(disk_classes):
    truth = dict(TRUTH, per_vcpu=5000.0, dataset_gib=40.0)
    fit = _fit(simulate_points("w", truth, GRID_VCPUS, DISKS, RAMS, seed=0), disk_classes)
    near = fit.predict(8, 30.0, 140.0)  # 26 of 40 GiB cached: a little more RAM caches the rest
    assert near.bottleneck == "memory" and near.ram_needed_gib <= 60
    huge = _fit(simulate_points("w", dict(truth, dataset_gib=5000.0), GRID_VCPUS, DISKS, RAMS, seed=0), disk_classes)
    far = huge.predict(8, 30.0, 140.0)
    assert far.bottleneck == "disk" and far.ram_needed_gib > 1000


def test_dataset_gib_rescales_the_ram_axis(disk_classes):
    """Measured on a 60 GiB dataset; the real one is 600 GiB: 48 GiB of RAM caches a tenth as much."""
    points = simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, noise=0.0, seed=0)
    small = _fit(points, disk_classes)
    real = _fit(points, disk_classes, dataset_gib=600.0)
    assert real.params["dataset_gib"].value == 600 and real.params["measured_dataset_gib"].value == 60
    assert "rescaled" in real.params["dataset_gib"].note
    x_small = small.predict(32, 48.0, 300.0).throughput
    x_real = real.predict(32, 48.0, 300.0).throughput
    assert x_real < x_small
    assert x_real == pytest.approx(300 / (0.3 * (1 - 44 / 600)), rel=0.02)
    # The fit itself (residuals, LOO) stays on the measured dataset.
    assert real.loo_median_ape == pytest.approx(small.loo_median_ape, rel=1e-6)


def test_cpu_scale_is_the_ratio_of_calibrations(disk_classes):
    assert cpu_scale(310.0, 357.0) == pytest.approx(357 / 310)
    assert cpu_scale(None, 357.0) == 1.0
    assert cpu_scale(310.0, None) == 1.0
    assert cpu_scale(0.0, 357.0) == 1.0
    points = [dataclasses.replace(p, calibration_ips=310.0)
              for p in simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, seed=0)]
    fit = _fit(points, disk_classes)
    assert fit.calibration_ips == 310.0
    base = fit.predict(2, 48.0, None).throughput
    scaled = fit.predict(2, 48.0, None, cpu_scale=cpu_scale(310.0, 357.0)).throughput
    assert scaled / base == pytest.approx(357 / 310, rel=1e-9)


def test_one_point_is_fitted_honestly(disk_classes):
    fit = _fit([Point("w", 4, 16.0, "ssd", 800.0, "images/s")], disk_classes)
    assert fit.n_points == 1 and fit.loo_median_ape is None and fit.loo_max_ape is None
    # One shape cannot tell the GPU from the CPU: nothing carries an interval or claims to be identified.
    for name in ("gpu_ceiling", "per_vcpu", "usl_sigma", "usl_kappa", "bytes_per_sample"):
        p = fit.params[name]
        assert not p.identifiable and p.low is None and p.note, name
    assert fit.params["usl_sigma"].source == "fixed" and fit.params["usl_kappa"].source == "fixed"
    assert fit.params["usl_sigma"].value == 0 and fit.params["usl_kappa"].value == 0
    assert fit.predict(4, 16.0, 300.0).throughput == pytest.approx(800.0, rel=1e-6)
    assert math.isfinite(fit.predict(64, 512.0, None).throughput)


def test_two_points_and_no_vcpu_variation(disk_classes):
    two = _fit([Point("w", 2, 16.0, "local-nvme", 500.0, "images/s"),
                Point("w", 4, 16.0, "local-nvme", 990.0, "images/s")], disk_classes)
    assert two.loo_median_ape is None
    assert two.predict(4, 16.0, None).throughput == pytest.approx(990, rel=0.05)
    flat = [Point("w", 8, ram, disk, 1000.0 + i, "images/s")
            for i, (ram, disk) in enumerate([(16.0, "ssd"), (32.0, "ssd"), (16.0, "standard"), (32.0, "standard")])]
    fit = _fit(flat, disk_classes)
    assert not fit.params["usl_sigma"].identifiable and not fit.params["usl_kappa"].identifiable
    assert "vCPU level" in fit.params["usl_kappa"].note
    assert fit.loo_median_ape is not None and fit.loo_median_ape < 0.01


def test_flat_gpu_bound_workload_predicts_no_slowdown(disk_classes):
    """A PTB-LSTM-like workload: the same rate at every shape."""
    points = [Point("w", v, ram, "local-nvme", 1000.0 * (1 + 0.002 * ((v + int(ram)) % 3 - 1)), "tokens/s")
              for v in (1, 2, 4, 8) for ram in (2.0, 8.0)]
    fit = _fit(points, disk_classes)
    assert fit.unit == "tokens/s"
    assert fit.ceiling == pytest.approx(1000, rel=0.01)
    for v in (1, 2, 4, 8, 64):
        assert fit.predict(v, 4.0, 140.0).throughput >= 0.99 * 1000 * 0.998
    assert fit.loo_max_ape < 0.01


def test_disk_bound_everywhere_makes_cpu_a_lower_bound(disk_classes):
    points = [Point("w", v, 16.0, "standard", 1400.0 * (1 + 0.001 * (v % 3)), "images/s", read_mb_per_sample=0.1)
              for v in (2, 4, 8)]
    fit = _fit(points, disk_classes)
    c = fit.params["per_vcpu"]
    assert c.source == "fixed" and not c.identifiable and "lower bound" in c.note
    assert c.value == pytest.approx(1400 * 1.002 / 2, rel=0.01)
    assert fit.predict(8, 16.0, 140.0).bottleneck in ("disk", "memory")
    # The GPU was never seen above the disk's rate: the ceiling is only a lower bound, said so.
    g = fit.params["gpu_ceiling"]
    assert not g.identifiable and "lower bound" in g.note
    assert fit.predict(8, 16.0, 300.0).throughput >= fit.predict(8, 16.0, 140.0).throughput


def test_failed_points_do_not_fit_and_oom_raises_the_footprint(disk_classes):
    points = simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, seed=0, measured=("bytes_per_sample", "dataset_gib"))
    points.append(Point("w", 4, 6.0, "ssd", 0.0, "images/s", status="oom"))
    points.append(Point("w", 4, 8.0, "ssd", 0.0, "images/s", status="failed"))
    points.append(Point("dead", 4, 8.0, "ssd", 0.0, "images/s", status="failed"))
    fits = fit_points(points, disk_classes)
    assert "dead" not in fits
    fit = fits["w"]
    assert fit.params["footprint_gib"].value == 6.0 and fit.params["footprint_gib"].source == "measured"
    assert any("out of memory" in n for n in fit.notes)
    assert fit.predict(4, 5.0, None).throughput == 0


def test_only_synthetic_points(disk_classes):
    fits = fit_points([Point("w", 8, 32.0, "local-nvme", 4678.0, "images/s", input="synthetic")], disk_classes)
    fit = fits["w"]
    assert fit.ceiling == 4678.0 and fit.params["gpu_ceiling"].source == "measured"
    assert any("synthetic" in n for n in fit.notes)


def test_unthrottled_device_bandwidth_from_points(disk_classes):
    truth = dict(TRUTH, per_vcpu=5000.0, dataset_gib=500.0)
    points = simulate_points("w", truth, (1, 2, 4), {"local-nvme": 400.0, "ssd": 300.0, "standard": 140.0},
                             RAMS, seed=0)
    points = [dataclasses.replace(p, device_read_mbps=400.0) for p in points]
    fit = _fit(points, disk_classes)
    p = fit.params["disk_local-nvme_mbps"]
    assert p.value == 400.0 and p.source == "fio"
    assert fit.disk_mbps("local-nvme") == 400.0 and fit.disk_mbps("standard") == 140.0
    fio = _fit(simulate_points("w", truth, (1, 2, 4), DISKS, RAMS, seed=0), disk_classes, disk_mbps={"ssd": 250.0})
    assert fio.params["disk_ssd_mbps"].value == 250.0 and fio.params["disk_ssd_mbps"].source == "fio"


def test_variants_are_fitted_apart_and_only_cpu_decoding_gets_the_gpu_point(disk_classes):
    cpu = simulate_points("resnet50-train", TRUTH, (1, 2, 4, 8), DISKS, RAMS, seed=0, synthetic=True)
    gpu = simulate_points("resnet50-train", dict(TRUTH, per_vcpu=4000.0), (1, 2, 4, 8), DISKS, RAMS, seed=1,
                          synthetic=False)
    cpu = [dataclasses.replace(p, decode="cpu" if p.input != "synthetic" else "") for p in cpu]
    gpu = [dataclasses.replace(p, decode="gpu") for p in gpu]
    groups = group_points(cpu + gpu)
    assert set(groups) == {"resnet50-train[decode=cpu]", "resnet50-train[decode=gpu]"}
    # GPU decoding takes GPU time: input already on the device does not bound it, its own points do.
    assert any(p.input == "synthetic" for p in groups["resnet50-train[decode=cpu]"])
    assert not any(p.input == "synthetic" for p in groups["resnet50-train[decode=gpu]"])
    fits = fit_points(cpu + gpu, disk_classes)
    assert fits["resnet50-train[decode=gpu]"].predict(2, 48.0, None).throughput > \
        fits["resnet50-train[decode=cpu]"].predict(2, 48.0, None).throughput
    assert fits["resnet50-train[decode=cpu]"].params["gpu_ceiling"].source == "measured"
    assert fits["resnet50-train[decode=gpu]"].params["gpu_ceiling"].source != "measured"


def test_smooth_minimum_is_chosen_only_when_it_predicts_better(disk_classes):
    hard = _fit(simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, noise=0.02, seed=5), disk_classes)
    assert hard.model == "min" and "knee_sharpness" not in hard.params
    # A knee that is really smooth: X = (G^-p + X_cpu^-p)^(-1/p) with p = 3.
    import numpy as np

    points = []
    for v in GRID_VCPUS:
        x_cpu = 400.0 * v
        x = (2500.0 ** -3 + x_cpu ** -3) ** (-1 / 3)
        for i in range(3):  # three RAM sizes, all of which hold the data: three shapes on one curve
            points.append(Point("w", v, 48.0 + 8 * i, "local-nvme", x * (1 + 0.003 * (i - 1)), "images/s"))
    smooth = _fit(points, disk_classes)
    assert smooth.model == "softmin"
    p = smooth.params["knee_sharpness"]
    assert 2 <= p.value <= 5
    assert smooth.ceiling == pytest.approx(2500, rel=0.1)
    assert smooth.loo_median_ape < 0.01
    assert np.isfinite(smooth.predict(6, 48.0, None).throughput)


def test_summary_is_plain_data(disk_classes):
    import json

    fit = _fit(simulate_points("w", TRUTH, (1, 2, 4), DISKS, RAMS, seed=0), disk_classes)
    data = json.loads(json.dumps(fit.summary()))
    assert data["workload"] == "w" and data["params"]["per_vcpu"]["source"] == "fit"
    assert len(data["residuals"]) == len(fit.residuals)
    assert isinstance(fit.params["per_vcpu"], Param)


def test_monotone_prediction_holds_the_usl_peak(disk_classes):
    fit = _fit(simulate_points("w", TRUTH, GRID_VCPUS, DISKS, RAMS, seed=0), disk_classes)
    peak = fit.usl_peak_vcpus()
    assert peak == pytest.approx(((1 - 0.08) / 0.004) ** 0.5, rel=0.1)
    plain = fit.predict(64, 48.0, None).throughput
    held = fit.predict(64, 48.0, None, monotone=True).throughput
    assert held > plain  # 64 vCPUs can still run the peak's number of workers
    assert held == pytest.approx(fit.predict(peak, 48.0, None).throughput)
    assert fit.predict(8, 48.0, None, monotone=True).throughput == fit.predict(8, 48.0, None).throughput


def test_measured_ceiling_is_kept_and_a_disagreement_is_noted(disk_classes):
    """The synthetic-input point is the ceiling; GPU-bound shapes 6% below it are pointed out."""
    truth = dict(TRUTH, gpu_ceiling=1500.0)  # reached from 4 vCPUs up on most shapes
    points = simulate_points("w", truth, GRID_VCPUS, DISKS, RAMS, noise=0.01, seed=4, synthetic=False)
    points.append(Point("w", 32, 48.0, "local-nvme", 1500.0 / 0.94, "images/s", input="synthetic"))
    fit = _fit(points, disk_classes)
    g = fit.params["gpu_ceiling"]
    assert g.source == "measured" and g.value == pytest.approx(1500.0 / 0.94)
    assert any("GPU-bound shape(s) ran at 94%" in n for n in fit.notes)


def test_a_shape_faster_than_the_synthetic_point_is_the_ceiling(disk_classes):
    """GPU-bound shapes 6% above the synthetic-input point: the ceiling is the best of them, never
    the lower synthetic figure (measurements outrank the model), and the parameter says why."""
    truth = dict(TRUTH, gpu_ceiling=1500.0)
    points = simulate_points("w", truth, GRID_VCPUS, DISKS, RAMS, noise=0.01, seed=4, synthetic=False)
    points.append(Point("w", 32, 48.0, "local-nvme", 1500.0 * 0.94, "images/s", input="synthetic"))
    fit = _fit(points, disk_classes)
    g = fit.params["gpu_ceiling"]
    best = max(p.throughput for p in points)
    assert g.source == "measured" and g.value == pytest.approx(best) and "best measured shape" in g.note
    assert all(pred <= fit.ceiling * (1 + 1e-9) for _, pred in fit.residuals)


def test_model_accuracy_benchmark_holds_out_shapes_and_levels(tmp_path, benchmark):
    from sizer.points import write_points_csv

    bench = benchmark("model_accuracy")
    points = simulate_points("w", TRUTH, (1, 2, 4, 8, 16), DISKS, RAMS, noise=0.02, seed=0)
    rows = bench.evaluate(points)
    methods = {r["method"]: r for r in rows if r["workload"] == "w"}
    assert set(methods) == {"leave-one-point-out", "leave-one-shape-out", "held-out vCPU level"}
    assert methods["leave-one-shape-out"]["n"] == len(points) - 1
    assert methods["held-out vCPU level"]["n"] == len(points) - 1
    for r in methods.values():
        assert r["median_ape"] < 0.05 and r["max_ape"] >= r["median_ape"]
    csv_path = tmp_path / "points.csv"
    write_points_csv(points[:12], csv_path)
    assert bench.main(["--input", str(csv_path), "--json"]) == 0
    assert bench.main(["--input", str(tmp_path / "absent.csv")]) == 2


def test_a_window_inside_the_first_pass_counts_as_reading_everything_from_disk(disk_classes):
    """Points start cold: a window that ended within the first pass read every sample from the disk,
    however much RAM the shape had. The fit must not explain such a disk-bound rate by the CPU."""
    per_vcpu, b_mb = 200.0, 0.11
    points = []
    for v in (4, 8, 16):
        for disk, cap in (("local-nvme", None), ("standard", 140.0)):
            rate = per_vcpu * v if cap is None else min(per_vcpu * v, cap / b_mb)
            points.append(Point("w", v, 31.0, disk, rate, "images/s", read_mb_per_sample=b_mb,
                                footprint_gib=6.0, dataset_gib=4.6, epochs=0.3))
    points.append(Point("w", 16, 31.0, "local-nvme", 4700.0, "images/s", input="synthetic"))
    fit = _fit(points, disk_classes)
    assert fit.params["per_vcpu"].value == pytest.approx(per_vcpu, rel=0.05)
    assert fit.loo_median_ape is not None and fit.loo_median_ape < 0.03
    # the same rates read as steady-state (no pass count) would need a cache miss the RAM rules out
    steady = _fit([dataclasses.replace(p, epochs=None) for p in points], disk_classes)
    assert steady.loo_median_ape > fit.loo_median_ape


def test_a_first_pass_point_is_predicted_as_measured_reading_everything_from_disk(disk_classes):
    fit = _fit(simulate_points("w", TRUTH, (1, 2, 4, 8), DISKS, RAMS, seed=0), disk_classes)
    held_out = Point(workload="w", vcpus=8, ram_gib=48.0, disk_class="standard", throughput=1.0, unit="images/s",
                     status="ok", epochs=0.4)
    steady = fit.predict(8, 48.0, fit.disk_mbps("standard"))
    cold = fit.predict_measured(held_out)
    bytes_per_sample = fit.value("bytes_per_sample")
    assert cold.throughput == pytest.approx(min(steady.throughput, 140.0 / bytes_per_sample), rel=1e-6)
    assert cold.throughput < steady.throughput  # a later pass finds the dataset in the page cache
    assert fit.predict_measured(dataclasses.replace(held_out, epochs=2.0)).throughput == pytest.approx(steady.throughput)


def test_a_one_pass_job_counts_as_first_pass_from_its_image_counts(disk_classes):
    """imagenet-preprocess reads its folder once: stored points that give only how many images of the
    pass were done (no `epochs`) still read everything from the disk, whatever the RAM."""
    per_vcpu, b_mb = 200.0, 0.11
    points = []
    for v in (4, 8, 16):
        for ram in (8.0, 32.0):
            for disk, cap in (("local-nvme", None), ("standard", 140.0)):
                rate = per_vcpu * v if cap is None else min(per_vcpu * v, cap / b_mb)
                points.append(Point("w", v, ram, disk, rate, "images/s", read_mb_per_sample=b_mb, footprint_gib=0.5,
                                    dataset_gib=5.0, epochs=epochs_of({"images_done": 20_000, "images_total": 45_000})))
    fit = _fit(points, disk_classes)
    assert fit.loo_max_ape is not None and fit.loo_max_ape < 0.02
    assert fit.predict_measured(points[-1]).throughput == pytest.approx(140.0 / b_mb, rel=0.02)


def test_a_ceiling_not_reached_is_never_below_the_best_measurement(disk_classes):
    """30 points of a flat, noisy rate (ptb-lstm-train on an H200 read 90,000 to 129,000 tokens/s at
    every shape) and one at 130,000: the ceiling is that measurement, not the fitted level under it,
    and the fit says so (the recommender then weighs each shape's own measurements)."""
    rng = np.random.default_rng(7)
    points = [Point("w", v, ram, disk, 100_000.0 * (1 + 0.06 * rng.standard_normal()), "tokens/s")
              for v in (2, 4, 8, 12, 16) for ram in (8.0, 32.0) for disk in ("local-nvme", "ssd", "standard")]
    points[5] = dataclasses.replace(points[5], throughput=130_000.0)
    fit = _fit(points, disk_classes)
    assert fit.ceiling == pytest.approx(130_000.0)
    assert fit.params["gpu_ceiling"].bound == "lower"
    assert any("ceiling held at the best measured shape, 130,000 tokens/s" in n for n in fit.notes)


def test_a_job_that_reads_once_gets_nothing_from_ram_beyond_its_footprint(disk_classes):
    b_mb = 0.11
    points = [Point("w", v, ram, disk, min(200.0 * v, (cap or 1e12) / b_mb), "images/s", read_mb_per_sample=b_mb,
                    footprint_gib=1.0, dataset_gib=5.0, epochs=0.4, reads_once=True)
              for v in (2, 4, 8, 16) for ram in (8.0, 32.0) for disk, cap in (("local-nvme", None), ("standard", 140.0))]
    once = _fit(points, disk_classes)
    assert once.reads_once and any("reads each sample once" in n for n in once.notes)
    big = once.predict(16, 256.0, 140.0)  # 256 GiB would cache the 5 GiB dataset many times over
    assert big.throughput == pytest.approx(140.0 / b_mb, rel=0.02) and big.bottleneck == "disk"
    assert big.ram_needed_gib is None  # no RAM lifts it
    again = _fit([dataclasses.replace(p, reads_once=False) for p in points], disk_classes)
    assert again.predict(16, 256.0, 140.0).throughput > 1.5 * big.throughput  # training's later epochs are cached
    # Points that do not say: as their workload declares, added where they are loaded.
    points = [dataclasses.replace(p, workload="imagenet-preprocess", reads_once=None) for p in points]
    assert not fit_points(points, disk_classes)["imagenet-preprocess"].reads_once  # the model reads no registry
    assert fit_points(with_facts(points), disk_classes)["imagenet-preprocess"].reads_once


def test_reads_once_comes_from_the_workload_and_round_trips_through_points_csv(tmp_path):
    from sizer.points import read_points_csv, write_points_csv
    from workloads import declares_reads_once

    # A point that does not say is fitted as its workload declares (the value itself loads no registry).
    assert Point("imagenet-preprocess", 2, 8.0, "ssd", 1.0, "images/s").reads_once is None
    assert declares_reads_once("imagenet-preprocess")
    assert declares_reads_once("resnet50-infer")
    assert not declares_reads_once("resnet50-train")
    assert not declares_reads_once("someone-elses-job")
    path = tmp_path / "points.csv"
    write_points_csv([Point("someone-elses-job", 2, 8.0, "ssd", 1.0, "images/s", reads_once=True)], path)
    assert read_points_csv(path)[0].reads_once is True
    path.write_text(path.read_text().replace("True", "maybe"))
    with pytest.raises(SizerError, match="reads_once"):
        read_points_csv(path)


def test_a_job_that_never_read_the_disk_has_no_disk_term(disk_classes):
    """A corpus loaded onto the GPU before the window (ptb-lstm-train): every point read 0 bytes, so
    a throttled disk cannot bound it, even in a shape whose window ended inside its first pass (seen
    on an H200: holding out the one such point left bytes-per-sample free, fitted at 1e6 MB, and the
    held-out shape was predicted at 0 tokens/s)."""
    rng = np.random.default_rng(3)
    points = []
    for v in (2, 4, 8, 12, 16):
        for ram in (8.0, 32.0):
            for disk in ("local-nvme", "ssd", "standard"):
                points.append(Point("w", v, ram, disk, 110_000.0 * (1 + 0.05 * rng.standard_normal()), "tokens/s",
                                    read_mb_per_sample=0.0, footprint_gib=1.2, dataset_gib=0.006,
                                    epochs=2.0))
    index = next(i for i, p in enumerate(points) if (p.vcpus, p.ram_gib, p.disk_class) == (4, 32.0, "standard"))
    points[index] = first_pass = dataclasses.replace(points[index], epochs=0.9)
    fit = _fit([p for p in points if p is not first_pass], disk_classes)
    predicted = fit.predict_measured(first_pass)
    assert predicted.throughput == pytest.approx(110_000.0, rel=0.1)
    assert "io" not in predicted.terms
    assert fit.params["bytes_per_sample"].source == "fixed"
    # one point that did read makes the disk a term again, fitted from the throttled shapes
    points[0] = dataclasses.replace(points[0], read_mb_per_sample=0.01)
    assert _fit(points, disk_classes).params["bytes_per_sample"].source != "fixed"
