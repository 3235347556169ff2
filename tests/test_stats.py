import math

import pytest

from workloads import stats


def test_median_and_percentile():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    assert stats.percentile([0, 10], 50) == 5
    assert stats.percentile(list(range(101)), 99) == pytest.approx(99)
    with pytest.raises(ValueError):
        stats.median([])


def test_relative_spread():
    assert stats.relative_spread([100]) == 0
    assert stats.relative_spread([90, 100, 110]) == pytest.approx(0.2)


def test_window_rates_exclude_warmup_and_split_evenly():
    # 2 warm-up steps that are slow, then 10 steps of 10 samples at 0.1 s -> 100/s.
    steps = [[1.0, 10, 1], [1.0, 10, 1]] + [[0.1, 10, 0]] * 10
    rates = stats.window_rates(steps, 5)
    assert len(rates) == 5
    assert all(r == pytest.approx(100) for r in rates)
    rate, spread, _ = stats.summarize(steps, 5)
    assert rate == pytest.approx(100)
    assert spread == pytest.approx(0)


def test_window_rates_see_a_slowdown():
    steps = [[0.1, 10, 0]] * 5 + [[0.2, 10, 0]] * 5
    rates = stats.window_rates(steps, 2)
    assert rates == [pytest.approx(100), pytest.approx(50)]
    _, spread, _ = stats.summarize(steps, 2)
    assert spread > 0.5


def test_fewer_steps_than_windows():
    assert stats.window_rates([[0.5, 10, 0]], 5) == [20]
    assert stats.window_rates([[0.5, 10, 1]], 5) == []
    assert math.isinf(stats.relative_spread([0, 0, 1])) or stats.relative_spread([0, 0, 1]) > 0


def test_meter_windows_span_whole_loader_rounds():
    """Batches from W loader workers arrive in bursts of about W: the meter wants at least one whole
    round of W steps per window before it may stop, and marks a window it had to cut short."""
    from workloads.measure import Meter
    from workloads.protocol import Result

    meter = Meter(warmup_steps=0, time_budget_s=3600.0, min_steps=1, min_seconds=0.0, n_windows=5, gpu=False,
                  round_steps=16)
    assert meter.min_steps == 80
    for _ in range(79):
        meter.step(0.01, 256)
    assert meter.window_short and not meter.done()
    meter.step(0.01, 256)
    assert not meter.window_short and meter.done()
    short = Meter(warmup_steps=0, time_budget_s=0.0, min_steps=1, n_windows=5, gpu=False, round_steps=16)
    for _ in range(10):
        short.step(0.01, 256)
    assert short.done()  # past the hard stop (budget 0) with at least one step per window
    result = short.finish(Result(workload="w", framework="f", unit="u/s", profile="cpu-small"), 1)
    # Its windows agree: not noisy, and the short window is named where the point is shown.
    assert result.status == "ok" and "10 of 80" in result.extra["window_short"]


def test_meter_judges_the_spread_a_few_times_a_second_not_at_every_step():
    """Judging the spread costs time in the number of steps so far; done per step it slowed a fast
    workload as its window grew (ptb-lstm-train: 6 ms steps became 10 ms). Fast steps must be judged
    at most every CHECK_EVERY_S of measured time; slow steps still at every step."""
    from workloads.measure import Meter

    never = -1.0  # a spread target no window can meet: the meter judges until the budget ends
    fast = Meter(warmup_steps=0, time_budget_s=3600.0, min_steps=1, min_seconds=0.0, gpu=False, spread_target=never)
    for _ in range(20_000):  # 20 s of 1 ms steps
        fast.step(0.001, 1.0)
        assert not fast.done()
    assert fast.spread_checks <= 20.0 / Meter.CHECK_EVERY_S + 1
    slow = Meter(warmup_steps=0, time_budget_s=3600.0, min_steps=1, min_seconds=0.0, gpu=False, spread_target=never)
    for i in range(10):
        slow.step(1.0, 100.0 + i)
        slow.done()
    assert slow.spread_checks == 10 - (slow.min_steps - 1)  # every step once enough steps are in


def test_tracked_counters_give_their_growth_over_the_window_alone():
    """A workload's own cumulative counters (Meter.track) are read as the window starts and ends:
    what they counted during warm-up stays out."""
    from workloads.measure import Meter
    from workloads.protocol import Result

    count = {"decoded_images": 0.0, "decode_cpu_seconds": 0.0}
    meter = Meter(warmup_steps=3, time_budget_s=3600.0, min_steps=1, min_seconds=0.0, n_windows=2, gpu=False)
    from workloads.image_loader import decode_cost

    meter.track(lambda: dict(count), decode_cost)
    for i in range(8):
        count["decoded_images"] += 10  # images made before the step that uses them
        count["decode_cpu_seconds"] += 0.5 if i < 3 else 0.04
        meter.step(0.1, 10)
    result = meter.finish(Result(workload="w", framework="f", unit="u/s", profile="cpu-small"), 1)
    # The window opens as the 3rd step completes: steps 4 to 8 are inside it, for the counters as
    # for the samples and seconds (they were read a step late before, so a short window's counters
    # came out a step short of its samples).
    assert result.counters["measured_samples"] == 50
    assert result.counters["decoded_images"] == 50
    assert result.counters["decode_cpu_seconds"] == pytest.approx(0.2)
    assert result.counters["decode_cpu_ms_per_image"] == pytest.approx(4.0)  # derived from the window's growth


def test_the_figure_is_the_whole_windows_rate_not_the_median_of_its_windows():
    # 2 workers: rounds of 2 batches whose waits alternate 0.8 s and 1.6 s (a burst falls early or late).
    steps = []
    for i in range(10):
        steps += [[0.8 if i % 2 == 0 else 1.6, 256.0, 0.0], [1e-3, 256.0, 0.0]]
    steps += [[0.5, 256.0, 0.0]]  # an incomplete last round: left out
    rate, spread, rates = stats.summarize(steps, 5, round_steps=2)
    whole = 10 * 512 / (5 * 0.801 + 5 * 1.601)
    assert rate == pytest.approx(whole)
    assert rate == pytest.approx(stats.window_rate(steps, round_steps=2))
    # The median of the rounds' own rates (639 and 320 images/s) says 480: a mean of rates, 12% above
    # what the window delivered.
    single = [n / dt for dt, n in stats._rounds(steps, 2)]
    assert abs(stats.median(single) - whole) / whole > 0.1
    assert spread >= 0 and len(rates) == 5


def test_window_rate_of_nothing_measured_is_zero():
    assert stats.window_rate([]) == 0.0
    assert stats.window_rate([[1.0, 10, 1]]) == 0.0
    assert stats.summarize([[1.0, 10, 1]]) == (0.0, 0.0, [])


# A 16-worker point as an H200 ran it: a start, warm-up and then 20 more steps at the GPU's own
# pace (54 ms a batch of 256) on batches read before the window, then the loader's steady state:
# rounds of four steps in 0.3 s (3,413 images/s), the first of each waiting for its input.
BACKLOG = [5.0] + [0.054] * 34 + [0.054] * 20
STEADY = [0.14, 0.054, 0.054, 0.052] * 12


def test_stored_steps_show_where_the_loop_caught_up_with_the_loaders_backlog():
    """The rule that re-derives points measured before loaders were drained (sizer.method.to_drained)."""
    intervals = BACKLOG + STEADY
    # The first step that waited for its input is the window's first.
    assert stats.window_start(intervals, 35, drain_s=4.0, round_steps=4) == 55
    assert stats.window_start(intervals[:55], 35, drain_s=4.0, round_steps=4) is None  # undecided so far
    assert stats.window_start(intervals[:34], 35, drain_s=4.0, round_steps=4) is None
    assert stats.window_start(intervals, 35, drain_s=None, round_steps=4) == 35  # no loader: the warm-up alone
    # A step of the warm-up's last round that waited: the backlog was gone already.
    assert stats.window_start([5.0] + [0.054] * 32 + [0.3, 0.054] + STEADY, 35, drain_s=4.0, round_steps=4) == 35
    # Two workers (an H200's 2-vCPU inference): rounds of a wait and a ready batch; the wait before
    # the last warm-up step counts.
    two = [1.591, 0.155, 0.020, 1.317, 0.024, 1.443, 0.011, 1.015, 0.026, 1.013, 0.016]
    assert stats.window_start(two, 7, drain_s=3.0, round_steps=2) == 7
    # A loop that never waits (bound by its own speed) opens after drain_s seconds of steps past the
    # warm-up; a slow step of its own opens it as it is, that step inside the window.
    assert stats.drained_warmup([5.0] + [0.054] * 100, 35, drain_s=1.0, round_steps=16) == 35 + 19  # 19 x 54 ms >= 1 s
    assert stats.window_start([5.0] + [0.085] * 40 + [0.239] + [0.085] * 40, 11, drain_s=6.0, round_steps=4) == 41
    assert stats.drained_warmup([5.0] + [0.054] * 30, 35, drain_s=1.0) == 31  # too few steps: all warm-up


def test_the_budget_runs_from_the_end_of_the_first_step(fake_clock):
    """A first step that takes longer than the budget (cold GPU libraries, cuDNN's autotuning: 17.5 s
    on a fresh H100) must not leave the window a few steps."""
    from workloads.measure import Meter

    never = -1.0  # a spread target no window meets: the meter runs to its budget
    step_s = 1 / 64  # exact in binary: the sums below are too
    meter = Meter(warmup_steps=2, time_budget_s=0.25, min_steps=10, min_seconds=0.1, n_windows=5, gpu=False,
                  spread_target=never, clock=fake_clock)
    fake_clock.sleep(0.5)  # the first step's one-time costs: twice the budget, past the hard stop
    meter.step(0.5, 8)
    assert meter.elapsed() == 0.0 and not meter.done()
    window_steps = 0
    while not meter.done():
        fake_clock.sleep(step_s)
        meter.step(step_s, 8)
        window_steps += 1
        assert window_steps < 1000
    assert not meter.window_short  # the old clock, started before the first step, stopped it at 5 steps
    # The budget spent (16 steps after the first), not the hard stop at 1.6 times it.
    assert window_steps == 16 and meter.elapsed() == 0.25
    assert sum(1 for s in meter.steps if not s[2]) == 15  # the first two steps were warm-up


def test_the_hard_stop_ends_a_window_whose_steps_never_reach_min_steps(fake_clock):
    """Steps slower than the budget allows: the meter goes on to HARD_STOP times the budget, then
    stops with its window marked short."""
    from workloads.measure import Meter
    from workloads.protocol import Result

    meter = Meter(warmup_steps=1, time_budget_s=1.0, min_steps=10, n_windows=5, gpu=False, clock=fake_clock)
    steps = 0
    while not meter.done():
        fake_clock.sleep(0.25)
        meter.step(0.25, 4)
        steps += 1
    # 1 warm-up step, then measured steps until 1.6 s past the first step's end with 5 measured.
    assert steps == 8 and meter.elapsed() == pytest.approx(1.75)
    assert meter.window_short
    result = meter.finish(Result(workload="w", framework="f", unit="samples/s", profile="cpu-small"), 1)
    assert result.extra["window_short"] == "7 of 10 steps measured"
    assert result.status == "ok" and result.throughput == pytest.approx(16.0)  # a short window is a mark, not noise
    assert result.counters["measured_seconds"] == pytest.approx(7 * 0.25)  # the window, on the meter's clock


def test_a_sub_window_holds_two_rounds_at_least():
    """An H200 point at 2 vCPUs (2 workers): 9 rounds of a wait and a ready batch, the last round two
    ready batches. Five windows left that round alone, 7,523 images/s beside four of 605-684."""
    measured = [0.048, 0.7, 0.109, 0.64, 0.129, 0.643, 0.13, 0.725, 0.045, 0.728, 0.059, 0.755, 0.072,
                0.796, 0.04, 0.783, 0.048, 0.021]
    steps = [[0.8, 256.0, 1.0]] * 4 + [[dt, 256.0, 0.0] for dt in measured]
    rate, spread, rates = stats.summarize(steps, 5, round_steps=2)
    assert len(rates) == 4  # 9 rounds: four windows of two rounds or more
    assert rate == pytest.approx(18 * 256 / sum(measured))
    # Cuts where the samples reach each window's share: windows of 3, 2, 2 and 2 rounds.
    assert rates[0] == pytest.approx(6 * 256 / sum(measured[:6]))
    assert rates[-1] == pytest.approx(4 * 256 / sum(measured[-4:]))
    assert max(rates) < 2 * min(rates) and 0.5 < spread < 1.0  # the burst still shows, diluted
    assert stats.window_rates([[1.0, 10, 0]] * 3, 5) == [10]  # three single-step rounds: one window


def test_windows_are_balanced_without_a_runt_at_the_end():
    # 11 equal steps in 5 windows: cuts at 2.2, 4.4, 6.6 and 8.8 steps give 3, 2, 2, 2 and 2 steps.
    steps = [[0.1, 10, 0]] * 10 + [[0.4, 10, 0]]
    rates = stats.window_rates(steps, 5)
    assert len(rates) == 5
    assert rates[-1] == pytest.approx(20 / 0.5)  # the slow last step shares its window with another
