"""Where a window's CPU time went: the meter takes it apart by thread and process (real processes,
real /proc counters)."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time

import pytest

from workloads.measure import Meter, cpu_breakdown, tree_counters
from workloads.protocol import Result


def _spin(seconds: float) -> None:
    """User-mode work for about `seconds` of CPU (reading a CPU-time clock is a system call, so it
    is read only now and then)."""
    end, x = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        for i in range(20_000):
            x += i * i


def _child_spins(stop) -> None:
    while not stop.is_set():
        _spin(0.01)


def _result() -> Result:
    return Result(workload="w", framework="none", unit="items/s", profile="cpu-small")


def test_the_window_splits_cpu_between_main_thread_side_threads_and_workers():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs so the child and the main thread run at once")
    stop = mp.get_context("fork").Event()
    child = mp.get_context("fork").Process(target=_child_spins, args=(stop,), daemon=True)
    child.start()
    try:
        meter = Meter(warmup_steps=0, time_budget_s=10, min_steps=1, gpu=False)
        meter.step(0.001, 1.0)  # opens the window
        t0 = time.perf_counter()
        _spin(0.6)  # the main thread works...
        time.sleep(0.6)  # ...then leaves the CPU to the child alone
        meter.step(time.perf_counter() - t0, 99.0)
        result = meter.finish(_result(), vcpus=2)
    finally:
        stop.set()
        child.join(timeout=5)
    c = result.counters
    wall = c["measured_seconds"]
    assert c["main_thread_cores"] == pytest.approx(0.6 / wall, abs=0.15)
    assert c["main_other_threads_cores"] < 0.1
    assert c["loader_cpu_cores"] > 0.7  # the child spun the whole window
    assert c["cpu_ms_per_sample"] == pytest.approx(1000 * c["cpu_seconds"] / 100.0)
    assert c["loader_cpu_ms_per_sample"] < c["cpu_ms_per_sample"]
    assert 0.0 <= c["cpu_system_share"] < 0.3  # spinning is user time
    assert c["minor_faults_per_sample"] >= 0


def test_fresh_memory_counts_as_page_faults():
    before = tree_counters()
    block = bytearray(64 << 20)  # 64 MiB, zeroed by the kernel page by page as it is touched
    block[::4096] = b"x" * len(block[::4096])
    parts = cpu_breakdown(before, tree_counters(), wall=1.0, samples=1)
    assert parts["minor_faults_per_sample"] >= (64 << 20) // 4096 * 0.9


def test_a_side_thread_is_not_the_main_thread():
    before = tree_counters()
    side = threading.Thread(target=_spin, args=(0.4,))
    side.start()
    side.join()
    after = tree_counters()
    parts = cpu_breakdown(before, after, wall=1.0, samples=0)
    assert parts["main_other_threads_cores"] >= 0.3
    assert parts["main_thread_cores"] < 0.1
    assert "cpu_ms_per_sample" not in parts  # no samples, no rate


def test_kernel_time_counts_as_system():
    before = tree_counters()
    end = time.perf_counter() + 0.5
    with open("/dev/zero", "rb", buffering=0) as f:
        while time.perf_counter() < end:
            f.read(1 << 20)  # the copy is the kernel's
    parts = cpu_breakdown(before, tree_counters(), wall=0.5, samples=1)
    assert parts["cpu_system_share"] > 0.3


def test_a_gpu_fed_in_bursts_by_busy_cpus_is_not_labelled_gpu_bound():
    from workloads.measure import bottleneck_label

    window = {"measured_seconds": 10.0, "read_bytes": 0.0, "cpu_util_per_vcpu": 0.99}
    # 12 busy vCPUs feeding an H200: GPU busy in most samples (median 95%) but 70% of the window on average.
    assert bottleneck_label({**window, "gpu_util_pct": 95.0, "gpu_util_mean_pct": 70.0}, 12) == "cpu"
    assert bottleneck_label({**window, "gpu_util_pct": 99.0, "gpu_util_mean_pct": 96.0}, 12) == "gpu"
    # Counters without the mean (stored before it was recorded) fall back to the median.
    assert bottleneck_label({**window, "gpu_util_pct": 95.0}, 12) == "gpu"
    idle_cpus = {**window, "cpu_util_per_vcpu": 0.5, "gpu_util_pct": 80.0, "gpu_util_mean_pct": 70.0}
    assert bottleneck_label(idle_cpus, 12) == "gpu"
