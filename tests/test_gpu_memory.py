"""GPU memory against batch size (sizer/model/gpu_memory.py), `sizer gpumem` on a host without a
GPU, and a command job's NVML figure (workloads/gpu_memory_use.py)."""

from __future__ import annotations

import json

import pytest

from sizer.model.gpu_memory import GIB, fit_memory, largest_batches, usable_bytes
from workloads.gpu_memory_use import allocator_peaks, used_by

MIB = 2**20


def test_the_fit_recovers_a_line_and_reports_its_residuals():
    points = [(b, 500 * MIB + 40 * MIB * b) for b in (16, 32, 64, 128)]
    fit = fit_memory(points)
    assert fit.fixed_bytes == pytest.approx(500 * MIB)
    assert fit.per_sample_bytes == pytest.approx(40 * MIB)
    assert fit.max_relative_residual == pytest.approx(0.0, abs=1e-9)
    noisy = fit_memory([(16, 1.0 * GIB), (32, 1.8 * GIB), (64, 3.6 * GIB)])
    assert noisy.max_relative_residual > 0.01
    assert sum(noisy.predict(b) - m for b, m in noisy.points) == pytest.approx(0.0, abs=1.0)  # least squares


def test_the_largest_batch_leaves_the_margin_free():
    fit = fit_memory([(32, 2 * GIB), (64, 3 * GIB)])  # 1 GiB + 1/32 GiB a sample
    assert fit.largest_batch(16, margin=0.10) == int((16 * 0.9 - 1) * 32)
    assert fit.largest_batch(16, margin=0.0) == (16 - 1) * 32
    assert fit.largest_batch(1.0, margin=0.10) is None  # not even one sample fits
    for size, batch in largest_batches(fit, [8, 16, 24, 16]).items():
        assert fit.predict(batch) <= usable_bytes(size) < fit.predict(batch + 1)
    assert fit.memory_needed_gib(64, margin=0.25) == pytest.approx(3 / 0.75)


@pytest.mark.parametrize("points, message", [
    ([(32, 1e9)], "two batch sizes"),
    ([(32, 1e9), (32, 2e9)], "two batch sizes"),
    ([(32, 2e9), (64, 1e9)], "do not grow"),
    ([(0, 1e9), (64, 2e9)], "batch sizes >= 1"),
])
def test_a_fit_needs_two_batch_sizes_and_growing_peaks(points, message):
    with pytest.raises(ValueError, match=message):
        fit_memory(points)


def test_a_margin_outside_zero_to_one_is_refused():
    fit = fit_memory([(32, 2 * GIB), (64, 3 * GIB)])
    with pytest.raises(ValueError, match="margin"):
        fit.largest_batch(16, margin=1.0)


def test_gpumem_without_a_gpu_prints_the_estimate_and_says_measuring_needs_one(cli, monkeypatch):
    import sizer.probe

    monkeypatch.setattr(sizer.probe, "gpu_info", lambda: {"count": 0, "devices": []})
    code, out, err = cli("gpumem", "resnet50-train", "--batches", "2,4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["measured"] is None and "needs a GPU" in data["measure_note"]
    assert [a["batch_size"] for a in data["analytic"]] == [2, 4]
    assert data["analytic"][1]["peak_bytes"] > data["analytic"][0]["peak_bytes"]
    assert data["fits"]["analytic"]["per_sample_bytes"] > 0
    sizes = [c["memory_gib"] for c in data["cards"]]
    assert sizes == sorted(sizes) and 24.0 in sizes
    batches = [c["largest_batch_analytic"] for c in data["cards"]]
    assert batches == sorted(batches)  # a larger card holds at least the batch of a smaller one

    code, _, err = cli("gpumem", "resnet50-train", "--measure")
    assert code == 2 and "needs a GPU" in err and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (("imagenet-preprocess",), "no fake step"),
    (("resnet50-train", "--batches", "64"), "at least two distinct sizes"),
    (("resnet50-train", "--batches", "a,b"), "whole numbers"),
    (("resnet50-train", "--margin", "1.5"), "--margin must be in"),
])
def test_gpumem_refuses_bad_input_with_one_line(cli, args, message):
    code, _, err = cli("gpumem", *args)
    assert code == 2 and message in err


def test_nvml_processes_are_summed_for_the_jobs_pids_only():
    processes = [(10, 500), (11, 300), (12, None), (99, 7000), (10, 200)]  # pid 10 on two GPUs
    assert used_by(processes, {10, 11}) == 1000
    assert used_by(processes, {12}) is None  # NVML hides its figure
    assert used_by(processes, {55}) is None


def test_allocator_peaks_are_empty_where_cuda_never_ran():
    assert allocator_peaks() == {}
