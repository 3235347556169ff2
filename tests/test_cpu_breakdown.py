"""Where a window's CPU time went: the meter takes it apart by thread and process (real processes,
real /proc counters)."""

from __future__ import annotations

import multiprocessing as mp
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


def _child_spins(go, spun, stop) -> None:
    """A worker's share: 0.8 s of CPU once the window is open, then idle until told to stop."""
    go.wait()
    _spin(0.8)
    spun.set()
    stop.wait()


def _result() -> Result:
    return Result(workload="w", framework="none", unit="items/s", profile="cpu-small")


def test_the_window_splits_cpu_between_main_thread_side_threads_and_workers(fake_clock):
    # CPU time is spun by amount, not for a while, and the window's seconds are the fake clock's: the
    # shares below are the same on an idle host and a busy one.
    ctx = mp.get_context("fork")
    go, spun, stop = ctx.Event(), ctx.Event(), ctx.Event()
    child = ctx.Process(target=_child_spins, args=(go, spun, stop), daemon=True)
    child.start()
    try:
        meter = Meter(warmup_steps=0, time_budget_s=10, min_steps=1, gpu=False, clock=fake_clock)
        meter.step(0.0, 1.0)  # opens the window
        go.set()
        _spin(0.6)  # the main thread works...
        assert spun.wait(60)  # ...and the child did its share
        fake_clock.sleep(2.0)
        meter.step(2.0, 99.0)
        result = meter.finish(_result(), vcpus=2)
    finally:
        stop.set()
        child.join(timeout=5)
    c = result.counters
    assert c["measured_seconds"] == 2.0
    tick = 0.03 / 2.0  # /proc counts CPU time in ticks of 10 ms, a few of which a reading can miss
    assert c["main_thread_cores"] == pytest.approx(0.6 / 2.0, abs=tick)
    assert c["main_other_threads_cores"] < 0.05
    assert c["loader_cpu_cores"] == pytest.approx(0.8 / 2.0, abs=tick)  # the child's 0.8 s
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
    with open("/dev/zero", "rb", buffering=0) as f:
        for _ in range(12_000):  # 12 GiB: about half a second
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
