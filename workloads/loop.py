"""The timed loop every workload runs, whatever its framework: the step clock, the drain of the
batches a loader made before the window, the passes over the data and the meter they feed.

Framework-free: the MXNet workloads run it in their own interpreter. On a CUDA device the step
clock imports torch when first used; importing this module needs no framework.

On a GPU, steps are timed as intervals between completions of consecutive steps: after queueing
step k the loop waits for step k-1 to finish (a CUDA event), so the GPU always has one step queued
and step times are true GPU-inclusive times, without the stall a full synchronize per step adds.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable, Iterable, Iterator

from workloads import distributed
from workloads.measure import Meter, tree_counters


def is_cuda(device: str) -> bool:
    return device.startswith("cuda")


class StepClock:
    """Step times as intervals between completions of consecutive steps.

    On the CPU a step is complete when its Python call returns. On a GPU, `tick` records an event
    after the step is queued and waits for the previous step's event, so one step stays queued and
    the reported interval covers the GPU's work and any wait for input. `clock` (seconds, default
    `time.perf_counter`) reads the time, so a test steps the loop in fake time.
    """

    def __init__(self, device: str, clock: Callable[[], float] = time.perf_counter):
        self.cuda = is_cuda(device)
        self.clock = clock
        self._pending: tuple[Any, float] | None = None
        self._last = 0.0

    def start(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self._last = self.clock()

    def _lap(self) -> float:
        now = self.clock()
        dt, self._last = now - self._last, now
        return dt

    def tick(self, samples: float) -> list[tuple[float, float]]:
        if not self.cuda:
            return [(self._lap(), samples)]
        import torch

        event = torch.cuda.Event()
        event.record()
        done = []
        if self._pending is not None:
            previous, n = self._pending
            previous.synchronize()
            done.append((self._lap(), n))
        self._pending = (event, samples)
        return done

    def flush(self) -> list[tuple[float, float]]:
        if self._pending is None:
            return []
        event, n = self._pending
        self._pending = None
        event.synchronize()
        return [(self._lap(), n)]


def _record(meter: Meter, completed: list[tuple[float, float]]) -> None:
    for seconds, samples in completed:
        meter.step(seconds, samples)


# A fetch from the loader that took longer than this, and than 4 times the quickest fetch of ready
# batches before it, waited for a batch to be made: the loader's queue was empty. The first fetch has
# no ready one before it: it waited if it took longer than DRAIN_FIRST_WAIT_S (on an H100 host, drains
# of 1 to 13 ready batches took 0.01-0.11 s; a 2-worker loader's next batch came 0.5-1 s). However long
# its fetches, a drain ends after DRAIN_MAX_S: a backlog is taken in well under a second.
DRAIN_WAIT_S = 0.005
DRAIN_FIRST_WAIT_S = 0.02
DRAIN_MAX_S = 1.0


def drain_ready(batches: Iterator, meter: Meter, clock: StepClock, samples_of: Callable[[Any], float]) -> tuple[Any, float]:
    """Take the batches the loader made before the window and drop them, until a fetch has to wait
    for one to be made; the window opens one round of steps later (`Meter.drained`).

    Loader workers fill their prefetch queue while the model is built and the first steps run
    (cuDNN's autotuning), so a consumer faster than they are would spend the window's first
    seconds on that backlog at its own pace (on an H200 host, 42 steps of 16-vCPU training at the
    GPU's 4,700 images/s before the loader's 3,335 showed, in a window that read 3,998 over both;
    near the GPU's speed the backlog outlasts whole windows). Taken without a step, the backlog is
    gone in milliseconds. The round of steps after it keeps out what the drain itself does to a
    loader faster than its consumer: its workers, idle behind a full queue, all start a batch at
    once and the consumer waits a whole batch's making for the first. A loader slower than its
    consumer has no backlog left after warm-up: its first fetch waits, and the drain ends there, so
    no batch is dropped at the loader's own pace.
    Returns the batch the last fetch waited for (the next step's) and the samples dropped (a pass
    over the data counts them).
    """
    _record(meter, clock.flush())  # the warm-up's last step, complete: the GPU is idle from here
    now = clock.clock
    t_start = now()
    limit = 4 * meter.warmup_steps + 8  # far more than the prefetch queue holds (warm-up spans its depth)
    dropped, dropped_samples, quickest = 0, 0.0, math.inf
    while True:
        t0 = now()
        batch = next(batches)
        took = now() - t0
        waited = took > (max(DRAIN_WAIT_S, 4 * quickest) if dropped else DRAIN_FIRST_WAIT_S)
        if waited or dropped >= limit or now() - t_start > DRAIN_MAX_S:
            break
        quickest = min(quickest, took)
        dropped += 1
        dropped_samples += samples_of(batch)
        del batch  # its shared-memory buffer goes back to its worker
    clock.start()
    meter.drained(dropped, dropped_samples, now() - t_start)
    return batch, dropped_samples


class _Passes:
    """Passes over the data as its samples go by: `pass_samples` samples each when given (an endless
    loader), else each run through the loader (`completed`). Marks phase `warm` from the second
    pass on, and records what the first one read from storage (`cold_read_bytes`, `cold_samples`)."""

    def __init__(self, meter: Meter, extra: dict[str, Any], pass_samples: float | None):
        self.meter = meter
        self.extra = extra
        self.pass_samples = pass_samples
        self.samples = 0.0
        self.count = 0
        self._read_before = tree_counters()["read_bytes"]

    def add(self, samples: float) -> None:
        self.samples += samples
        while self.pass_samples and self.samples >= self.pass_samples * (self.count + 1):
            self.completed()

    def completed(self) -> None:
        self.count += 1
        if self.count == 1:
            self.extra["cold_read_bytes"] = tree_counters()["read_bytes"] - self._read_before
            self.extra["cold_samples"] = self.samples
            self.meter.mark_phase("warm")


def _run_through(
    iterator: Iterator, step: Callable[[Any], float], meter: Meter, clock: StepClock, passes: _Passes,
    samples_of: Callable[[Any], float] | None,
) -> tuple[int, bool]:
    """Steps over `iterator` until it ends or the meter is done, draining the loader once warm-up
    asks for it. Returns the batches stepped and whether the meter is done."""
    batches = 0
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return batches, False
        samples = step(batch)
        batches += 1
        _record(meter, clock.tick(samples))
        passes.add(samples)
        if meter.done():
            return batches, True
        if meter.needs_drain:
            try:
                first, dropped = drain_ready(iterator, meter, clock, samples_of)  # type: ignore[arg-type]
            except StopIteration:
                return batches, False
            iterator = itertools.chain([first], iterator)  # the batch the drain waited for comes next
            passes.add(dropped)


def run_epochs(
    meter: Meter,
    loader: Iterable,
    step: Callable[[Any], float],
    clock: StepClock,
    extra: dict[str, Any],
    pass_samples: float | None = None,
    max_passes: int = 1000,
    samples_of: Callable[[Any], float] | None = None,
) -> int:
    """Run `step(batch) -> samples` over the loader until the meter is done.

    A pass over the data is `pass_samples` samples when given (an endless loader), else one run
    through the loader, which then starts again. Marks phase `cold` for the first pass and `warm`
    for later ones, and records what the complete first pass read from storage
    (`cold_read_bytes`, `cold_samples`) and how many passes ran (`epochs`). A meter that drains its
    loader (`Meter.drain`) has it drained after warm-up (`drain_ready`; `samples_of(batch)` counts
    a dropped batch's samples). Returns the steps run.
    """
    if meter.drain and samples_of is None:
        raise ValueError("a meter that drains its loader needs samples_of")
    passes = _Passes(meter, extra, pass_samples)
    steps = batches = 0
    clock.start()
    meter.mark_phase("cold")
    for _ in range(max_passes):
        batches, done = _run_through(iter(loader), step, meter, clock, passes, samples_of)
        steps += batches
        if done or pass_samples or batches == 0:
            break
        passes.completed()  # a finite loader ran out: one pass; go again
        batches = 0  # counted whole in the passes now (matters when max_passes ends the loop)
    _record(meter, clock.flush())
    if pass_samples:
        extra["epochs"] = passes.samples / pass_samples
    else:
        try:
            extra["epochs"] = passes.count + batches / len(loader)  # type: ignore[arg-type]
        except TypeError:
            pass  # endless, with no pass size: nothing to count
    return steps


def batch_samples(batch: Any) -> float:
    """Samples in a loader's batch: its labels, which come last ((images, labels), (data, lengths, labels))."""
    return float(len(batch[-1]))


def synthetic_batches(make: Callable[[], Any]):
    """An endless 'loader' that yields the same device-resident batch (input: synthetic)."""
    batch = make()

    class _Endless:
        def __iter__(self):
            while True:
                yield batch

    return _Endless()


def new_meter(spec: Any, cfg: dict[str, Any], warmup: int, device: str, round_steps: int = 1,
              loader_fed: bool = False) -> Meter:
    """A meter for a timed loop (in a rank of a multi-GPU point, its `distributed.RankMeter`).
    `loader_fed`: batches come from loader workers that read ahead, so the window opens once the
    loop has drained the batches they made before it (`drain_ready`; config `drain: false` turns
    that off)."""
    return distributed.new_meter(
        round_steps=round_steps,
        warmup_steps=warmup,
        time_budget_s=spec.time_budget_s,
        min_steps=int(cfg.get("min_steps", 10)),
        min_seconds=cfg.get("min_seconds"),
        spread_target=spec.spread_target,
        gpu=is_cuda(device),
        drain=loader_fed and bool(cfg.get("drain", True)),
    )
