"""The host's moment, recorded beside every point: steal time and a single-thread speed probe."""

from __future__ import annotations

import os

import pytest

from workloads.measure import Meter, cpu_speed_probe, steal_seconds
from workloads.protocol import Result


def test_steal_is_read_per_cpu_and_only_for_cpus_that_exist():
    mine = steal_seconds()
    assert mine is not None and mine >= 0.0
    assert steal_seconds({10**6}) is None  # no such CPU: nothing to report, not zero
    one = steal_seconds({min(os.sched_getaffinity(0))})
    assert one is not None and one <= mine + 0.05
    assert steal_seconds() >= mine  # a counter: it never goes back


class _TickingClock:
    """A fake clock that moves `tick` seconds each time it is read."""

    def __init__(self, tick: float):
        self.tick, self.now, self.reads = tick, 0.0, 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.tick
        return self.now


def test_probe_runs_at_least_its_time_and_three_rounds():
    # One read before the first round, one after each: a round takes 10 ms on this clock.
    clock = _TickingClock(0.01)
    assert cpu_speed_probe(0.05, clock=clock) == pytest.approx(5 * 256 * 1024 / 0.05 / 1e6)
    assert clock.reads == 1 + 5  # five rounds to reach 0.05 s
    clock = _TickingClock(1.0)
    assert cpu_speed_probe(0.05, clock=clock) == pytest.approx(3 * 256 * 1024 / 3.0 / 1e6)
    assert clock.reads == 1 + 3  # at least three rounds, however long each took


def test_meter_reports_the_steal_share_of_its_window(fake_clock):
    meter = Meter(warmup_steps=0, time_budget_s=0.2, min_steps=1, gpu=False, clock=fake_clock)
    for _ in range(3):
        fake_clock.sleep(0.01)
        meter.step(0.01, 1.0)
    fake_clock.sleep(10.0)
    result = meter.finish(Result(workload="w", framework="none", unit="items/s", profile="cpu-small"), vcpus=1)
    assert result.counters["measured_seconds"] == pytest.approx(10.03)  # from the first step's start
    assert 0.0 <= result.counters["steal_share"] <= 1.0
    assert 0.0 <= result.counters["main_cpu_cores"] < 0.1  # it slept through most of its window


def _point(v, rate, probe, util=0.98):
    from sizer.points import Point

    return Point("w", v, 8.0, "ssd", rate, "images/s", status="ok", cpu_util_per_vcpu=util,
                 host_probe_mbps=probe)


def test_cpu_cost_takes_a_slow_moment_out_within_a_vcpu_count_and_keeps_contention():
    from sizer.model import take_out_cpu_cost
    from sizer.points import Point

    def point(v, cost_ms, util=0.98):
        # A CPU-bound window: its rate is its busy vCPUs over its CPU time per image.
        return Point("w", v, 8.0, "ssd", v * util * 1000.0 / cost_ms, "images/s", status="ok",
                     cpu_util_per_vcpu=util, cpu_ms_per_sample=cost_ms)

    slow, typical, fast = point(2, 3.6), point(2, 3.0), point(2, 2.7)
    contended = [point(8, 3.6), point(8, 3.6)]  # more vCPUs, more CPU per image: a real difference
    idle = point(8, 9.0, util=0.3)  # bound elsewhere: left as measured
    unknown = Point("w", 2, 8.0, "ssd", 100.0, "images/s", status="ok", cpu_util_per_vcpu=0.99)
    points = [slow, typical, fast, *contended, idle, unknown]
    before = [p.throughput for p in points]
    scaled = take_out_cpu_cost(points)
    assert [p.speed_scale is not None for p in scaled] == [True] * 5 + [False] * 2
    assert [p.throughput for p in points] == before  # the measured points stay as measured
    assert not any(p.speed_scale is not None for p in points)
    s_slow, s_typical, s_fast, s_contended, _, s_idle, s_unknown = scaled
    assert s_slow.throughput == pytest.approx(typical.throughput)
    assert s_fast.throughput == pytest.approx(typical.throughput)
    assert s_slow.speed_scale == pytest.approx(3.6 / 3.0)
    assert s_fast.speed_scale == pytest.approx(2.7 / 3.0)
    assert s_typical.throughput == pytest.approx(typical.throughput)
    assert s_contended.throughput == pytest.approx(contended[0].throughput)
    assert s_contended.throughput / 8 < s_typical.throughput / 2  # contention stays in the figures
    assert s_idle is idle and s_unknown is unknown


def test_host_speed_divides_busy_points_by_their_probe_over_the_median_of_every_probed_point(benchmark):
    accuracy = benchmark("model_accuracy")
    slow, quick = _point(4, 800.0, 40.0), _point(4, 1000.0, 60.0)
    idle = _point(8, 1200.0, 80.0, util=0.4)  # its probe counts in the reference; its rate stays
    (slow, quick, idle), n = accuracy.normalize_host_speed([slow, quick, idle])
    assert n == 2
    assert slow.throughput == pytest.approx(800.0 * 60.0 / 40.0)
    assert quick.throughput == pytest.approx(1000.0)
    assert idle.throughput == 1200.0
