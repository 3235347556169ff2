"""The window of a loader-fed point opens once the batches its loader made before are taken
(loop.drain_ready): a consumer faster than its loader no longer spends the window's first
seconds on that backlog.

The loop runs in fake time (tests/fake_time.py): each loader below makes its batches on the fake
clock, as torch's DataLoader workers would, and each step sleeps on it, so what the drain and the
meter decide does not hang on how busy this host is. The same comparison on a real DataLoader is a
benchmark (lab/benchmarks/speed_comparisons.py loader-drain).
"""

from __future__ import annotations

from typing import Iterator

import pytest
from fake_time import FakeClock

from workloads import loop
from workloads.measure import Meter
from workloads.protocol import Result


def _result():
    return Result(workload="w", framework="f", unit="samples/s", profile="cpu-small")


def _run(meter: Meter, loader, step, clock: FakeClock) -> Result:
    loop.run_epochs(meter, loader, step, loop.StepClock("cpu", clock=clock), {}, samples_of=loop.batch_samples)
    return meter.finish(_result(), 1)


def test_drain_drops_the_ready_batches_and_opens_the_window_as_a_fetch_waits(fake_clock):
    made = {"n": 0}

    def loader():  # 8 batches ready at once, then one every 30 ms
        while True:
            if made["n"] >= 8:
                fake_clock.sleep(0.03)
            made["n"] += 1
            yield ([0] * 4, [1] * 4)

    meter = Meter(warmup_steps=2, time_budget_s=0.6, min_steps=5, min_seconds=0.3, n_windows=5, gpu=False, drain=True,
                  clock=fake_clock)
    count = {"taken": 0.0}
    meter.track(lambda: dict(count))

    def step(batch):
        count["taken"] += 4
        fake_clock.sleep(0.005)
        return 4.0

    result = _run(meter, loader(), step, fake_clock)
    assert result.counters["drained_batches"] == 6  # the third to the eighth: made before the window
    assert result.counters["drained_samples"] == 24
    assert result.counters["drain_seconds"] == pytest.approx(0.03)  # ready batches take no time, the ninth 30 ms
    # Every measured step waited 30 ms for its batch, made on demand, and stepped 5 ms.
    assert result.throughput == pytest.approx(4 / 0.035)
    assert result.counters["taken"] == result.counters["measured_samples"]  # counters start with the window
    assert result.counters["measured_seconds"] == pytest.approx(sum(s[0] for s in result.steps if not s[2]))
    with pytest.raises(ValueError, match="samples_of"):
        loop.run_epochs(Meter(warmup_steps=1, time_budget_s=1, drain=True, gpu=False), loader(), step,
                        loop.StepClock("cpu"), {})


def _workers_loader(clock: FakeClock, workers: int, batch_s: float, prefetch: int, batch: int) -> Iterator:
    """Batches as torch's DataLoader hands them out, in fake time: worker i % `workers` makes batch
    i in `batch_s` seconds once it has made its batch before and batch i has been asked for; the
    loader asks for `prefetch` batches a worker ahead, and for one more as each is taken."""
    made: list[float] = []
    taken: list[float] = []
    start = clock()
    i = 0
    while True:
        previous = made[i - workers] if i >= workers else start
        asked = taken[i - workers * prefetch] if i >= workers * prefetch else start
        made.append(max(previous, asked) + batch_s)
        clock.sleep(max(0.0, made[i] - clock()))
        taken.append(clock())
        yield ([0.0] * batch, [1] * batch)
        i += 1


def _measured(clock: FakeClock, drain: bool, item_s: float = 0.02, batch: int = 4, workers: int = 2,
              step_s: float = 0.032, prefetch: int = 8) -> Result:
    meter = Meter(warmup_steps=workers * prefetch + 3, time_budget_s=4.5, min_steps=10, min_seconds=2.0,
                  round_steps=workers, gpu=False, drain=drain, clock=clock)
    first = [True]

    def step(batch_):
        # The first step is slow (as cuDNN's autotuning is): the workers fill their queue meanwhile.
        clock.sleep(1.5 if first[0] else step_s)
        first[0] = False
        return float(batch)

    return _run(meter, _workers_loader(clock, workers, item_s * batch, prefetch, batch), step, clock)


def test_a_loader_faster_to_start_than_to_run_is_measured_at_its_own_rate():
    # Two workers make 100 samples/s (20 ms an item, batches of 4); the consumer could take 125.
    drained, as_before = _measured(FakeClock(), True), _measured(FakeClock(), False)
    assert drained.counters["drained_batches"] >= 4
    assert drained.throughput == pytest.approx(100, rel=0.01)  # the loader's 100 samples/s
    # Without the drain the backlog, taken at the consumer's 125 samples/s, is in the window (111).
    assert as_before.throughput > 1.1 * drained.throughput
    assert "drained_batches" not in as_before.counters


def test_a_consumer_slower_than_its_loader_is_measured_at_its_own_rate_drained_or_not():
    # Four workers make 160 samples/s (25 ms an item, batches of 8); the consumer takes 100 (80 ms a
    # batch). Drained, the workers all start a batch at once and the consumer waits 200 ms for the
    # first: the round of steps before the window keeps that out.
    options = dict(item_s=0.025, batch=8, workers=4, step_s=0.08, prefetch=2)
    drained = _measured(FakeClock(), True, **options)
    as_before = _measured(FakeClock(), False, **options)
    assert drained.counters["drained_batches"] >= 4
    assert drained.throughput == pytest.approx(100, rel=0.01)
    assert as_before.throughput == pytest.approx(100, rel=0.01)


def _paced_loader(clock: FakeClock, seconds: float):
    """A loader with no backlog: each batch is made `seconds` after the one before."""
    while True:
        clock.sleep(seconds)
        yield ([0] * 4, [1] * 4)


def test_a_loader_slower_than_its_consumer_is_not_drained_at_its_own_pace(fake_clock):
    # After warm-up the queue of a loader slower than its consumer is empty: the drain's first fetch
    # waits a whole batch. Taken for a ready fetch's pace, that wait let the drain drop batch after
    # batch as they were made (an H100 at 2 vCPUs: 20 batches in 10.9 s, a window of 6 steps).
    meter = Meter(warmup_steps=2, time_budget_s=1.0, min_steps=5, min_seconds=0.4, n_windows=5, gpu=False, drain=True,
                  clock=fake_clock)
    result = _run(meter, _paced_loader(fake_clock, 0.1), lambda batch: 4.0, fake_clock)
    assert result.counters["drained_batches"] == 0
    assert result.counters["drain_seconds"] == pytest.approx(0.1)  # one fetch, which waited
    assert "window_short" not in result.extra
    assert result.throughput == pytest.approx(40)  # 4 samples every 0.1 s


def test_a_drain_ends_after_its_time_limit_whatever_its_fetches_take(fake_clock, monkeypatch):
    # Fetches that each wait alike (batches made evenly, none ready) never look like a wait to the
    # relative rule once one of them passed for ready: the time limit ends the drain.
    monkeypatch.setattr(loop, "DRAIN_FIRST_WAIT_S", 1.0)
    monkeypatch.setattr(loop, "DRAIN_MAX_S", 0.3)
    meter = Meter(warmup_steps=2, time_budget_s=1.0, min_steps=5, min_seconds=0.4, n_windows=5, gpu=False, drain=True,
                  clock=fake_clock)
    result = _run(meter, _paced_loader(fake_clock, 0.05), lambda batch: 4.0, fake_clock)
    # Six fetches of 50 ms each are dropped; the seventh passes the 0.3 s limit and ends the drain.
    assert result.counters["drained_batches"] == 6
    assert result.counters["drain_seconds"] == pytest.approx(0.35)
