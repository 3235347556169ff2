"""The window of a loader-fed point opens once the batches its loader made before are taken
(loop.drain_ready): a consumer faster than its loader no longer spends the window's first
seconds on that backlog."""

from __future__ import annotations

import time

import pytest

from workloads import loop
from workloads.measure import Meter
from workloads.protocol import Result


def _result():
    return Result(workload="w", framework="f", unit="samples/s", profile="cpu-small")


def test_drain_drops_the_ready_batches_and_opens_the_window_as_a_fetch_waits():
    made = {"n": 0}

    def loader():  # 6 batches ready at once, then one every 30 ms
        while True:
            if made["n"] >= 8:
                time.sleep(0.03)
            made["n"] += 1
            yield ([0] * 4, [1] * 4)

    meter = Meter(warmup_steps=2, time_budget_s=0.6, min_steps=5, min_seconds=0.3, n_windows=5, gpu=False, drain=True)
    count = {"taken": 0.0}
    meter.track(lambda: dict(count))

    def step(batch):
        count["taken"] += 4
        time.sleep(0.005)
        return 4.0

    loop.run_epochs(meter, loader(), step, loop.StepClock("cpu"), {}, samples_of=loop.batch_samples)
    result = meter.finish(_result(), 1)
    assert result.counters["drained_batches"] == 6  # the third to the eighth: made before the window
    assert result.counters["drained_samples"] == 24
    # Every measured step waited about 30 ms for its batch: the rate is the loader's, about 4 / 0.03.
    assert 100 < result.throughput < 140
    assert result.counters["taken"] == result.counters["measured_samples"]  # counters start with the window
    with pytest.raises(ValueError, match="samples_of"):
        loop.run_epochs(Meter(warmup_steps=1, time_budget_s=1, drain=True, gpu=False), loader(), step,
                        loop.StepClock("cpu"), {})


class _SlowItems:
    """Items that take `seconds` each to make."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        time.sleep(self.seconds)
        return float(i), 1


def _measured_rate(drain: bool, item_s: float = 0.02, batch: int = 4, workers: int = 2, step_s: float = 0.032,
                   prefetch: int = 8) -> Result:
    import torch

    loader = torch.utils.data.DataLoader(_SlowItems(item_s), batch_size=batch, num_workers=workers,
                                         prefetch_factor=prefetch)
    meter = Meter(warmup_steps=workers * prefetch + 3, time_budget_s=4.5, min_steps=10, min_seconds=2.0,
                  round_steps=workers, gpu=False, drain=drain)
    first = [True]

    def step(batch_):
        # The first step is slow (as cuDNN's autotuning is): the workers fill their queue meanwhile.
        time.sleep(1.5 if first[0] else step_s)
        first[0] = False
        return float(batch)

    it = iter(loader)
    try:
        loop.run_epochs(meter, it, step, loop.StepClock("cpu"), {}, samples_of=loop.batch_samples)
        return meter.finish(_result(), 2)
    finally:
        it._shutdown_workers()


def test_a_real_loader_faster_to_start_than_to_run_is_measured_at_its_own_rate():
    # Two workers make 100 samples/s (20 ms an item, batches of 4); the consumer could take 125.
    drained, as_before = _measured_rate(True), _measured_rate(False)
    assert drained.counters["drained_batches"] >= 4
    assert 80 < drained.throughput < 112  # the loader's 100 samples/s
    assert as_before.throughput > 1.1 * drained.throughput  # the backlog taken at the consumer's pace
    assert "drained_batches" not in as_before.counters


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # four sleeping workers on two CPUs
def test_a_consumer_slower_than_its_loader_is_measured_at_its_own_rate_drained_or_not():
    # Four workers make 160 samples/s (25 ms an item, batches of 8); the consumer takes 100 (80 ms a
    # batch). Drained, the workers all start a batch at once and the consumer waits 200 ms for the
    # first: the round of steps before the window keeps that out.
    drained = _measured_rate(True, item_s=0.025, batch=8, workers=4, step_s=0.08, prefetch=2)
    as_before = _measured_rate(False, item_s=0.025, batch=8, workers=4, step_s=0.08, prefetch=2)
    assert drained.counters["drained_batches"] >= 4
    assert drained.throughput == pytest.approx(100, rel=0.05)
    assert drained.throughput == pytest.approx(as_before.throughput, rel=0.05)


def _paced_loader(seconds: float):
    """A loader with no backlog: each batch is made `seconds` after the one before."""
    while True:
        time.sleep(seconds)
        yield ([0] * 4, [1] * 4)


def test_a_loader_slower_than_its_consumer_is_not_drained_at_its_own_pace():
    # After warm-up the queue of a loader slower than its consumer is empty: the drain's first fetch
    # waits a whole batch. Taken for a ready fetch's pace, that wait let the drain drop batch after
    # batch as they were made (an H100 at 2 vCPUs: 20 batches in 10.9 s, a window of 6 steps).
    meter = Meter(warmup_steps=2, time_budget_s=1.0, min_steps=5, min_seconds=0.4, n_windows=5, gpu=False, drain=True)
    loop.run_epochs(meter, _paced_loader(0.1), lambda batch: 4.0, loop.StepClock("cpu"), {}, samples_of=loop.batch_samples)
    result = meter.finish(_result(), 1)
    assert result.counters["drained_batches"] == 0
    assert result.counters["drain_seconds"] < 0.3
    assert "window_short" not in result.extra
    assert result.throughput == pytest.approx(40, rel=0.15)  # 4 samples every 0.1 s


def test_a_drain_ends_after_its_time_limit_whatever_its_fetches_take(monkeypatch):
    # Fetches that each wait alike (batches made evenly, none ready) never look like a wait to the
    # relative rule once one of them passed for ready: the time limit ends the drain.
    monkeypatch.setattr(loop, "DRAIN_FIRST_WAIT_S", 1.0)
    monkeypatch.setattr(loop, "DRAIN_MAX_S", 0.3)
    meter = Meter(warmup_steps=2, time_budget_s=1.0, min_steps=5, min_seconds=0.4, n_windows=5, gpu=False, drain=True)
    loop.run_epochs(meter, _paced_loader(0.05), lambda batch: 4.0, loop.StepClock("cpu"), {}, samples_of=loop.batch_samples)
    result = meter.finish(_result(), 1)
    assert 1 <= result.counters["drained_batches"] <= 8
    assert result.counters["drain_seconds"] < 0.5
