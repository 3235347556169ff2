"""Per-vCPU calibration (`cpu-calibrate`): one vCPU's JPEG decode-and-augment rate, images/s.

The same work a training loader worker does per image (PIL decode, RandomResizedCrop to 224,
horizontal flip, to a uint8 tensor; `normalize: worker` adds ToTensor + Normalize as the
reference recipe's workers do), on a fixed set of generated ImageNet-like JPEGs held in
memory (so the disk never enters), in one process pinned to one of the CPUs it may use, with one
torch thread. Two hosts' figures give the ratio by which a CPU-bound term measured on one host
scales to the other's CPU model. Both profiles run the same measurement: it describes the host.
With `repeats` N the measurement runs N times in the one worker, one after another: the result is
the first's, and `extra["repeat_rates"]` holds all N rates (a sweep's host-speed timeline).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator

from workloads.image_loader import decode_cost
from workloads.image_transforms import NORMALIZE, decode_rgb, train_transform
from workloads.loop import StepClock, new_meter, run_epochs
from workloads.measure import bottleneck_label
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, Range, Result, Spec, Workload, register
from workloads.torch_common import framework_versions

CALIBRATION_SEED = 20180  # fixed: every host decodes the very same images


@register
class CpuCalibrate(Workload):
    name = "cpu-calibrate"
    framework = "pillow"
    unit = "images/s"
    description = "One vCPU's JPEG decode + RandomResizedCrop(224) + flip rate on fixed generated images"
    dataset = ""
    stresses = "CPU (one vCPU)"
    requires_modules = ("torch", "torchvision", "PIL", "numpy")
    _common = {"images": 48, "batch": 8, "image_size": 224, "seed": CALIBRATION_SEED, "warmup_steps": 2, "pin": True,
               "parallel": 1, "normalize": "device", "repeats": 1}
    defaults = {"gpu": dict(_common), "cpu-small": dict(_common)}
    choices = {"normalize": NORMALIZE}
    ranges = {"images": AT_LEAST_ONE, "batch": AT_LEAST_ONE, "image_size": Range(32), "warmup_steps": NOT_NEGATIVE,
              "parallel": AT_LEAST_ONE, "repeats": AT_LEAST_ONE}

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)

        import torch

        allowed = sorted(os.sched_getaffinity(0))
        threads = torch.get_num_threads()
        if cfg.get("pin", True):
            os.sched_setaffinity(0, {allowed[0]})  # one vCPU, whatever the shape allows
        torch.set_num_threads(1)
        neighbours = allowed[1 : max(1, min(int(cfg.get("parallel", 1)), len(allowed)))] if cfg.get("pin", True) else []
        images = _calibration_images(cfg)  # once: the neighbours decode the same set
        try:
            with busy_neighbours(neighbours, cfg, images) as rates:
                self._measure(spec, cfg, result, images)
                again = [self._measure_again(spec, cfg, images) for _ in range(int(cfg.get("repeats", 1)) - 1)]
            if again:
                result.extra["repeat_rates"] = [result.throughput, *again]
            if neighbours:
                result.extra["parallel"] = 1 + len(neighbours)
                result.extra["neighbour_rates"] = list(rates)
                all_rates = [result.throughput, *rates]
                result.extra["rate_per_vcpu_loaded"] = sum(all_rates) / len(all_rates)
        finally:  # a worker is a fresh process, but an in-process caller gets its CPUs back
            os.sched_setaffinity(0, allowed)
            torch.set_num_threads(threads)
        result.extra.update(
            method=calibration_method(cfg),
            cpu=allowed[0] if cfg.get("pin", True) else None,
            cpus_allowed=len(allowed),
            versions=framework_versions(),
        )
        result.bottleneck = bottleneck_label(result.counters, 1)
        return result

    def _measure_again(self, spec: Spec, cfg: dict, images: list[bytes]) -> float:
        """One more measurement in this process (`repeats`), its images/s. Repeats share one worker:
        a worker's start costs more than a short window."""
        again = self.new_result(spec, cfg)
        self._measure(spec, cfg, again, images)
        return again.throughput

    def _measure(self, spec: Spec, cfg: dict, result: Result, images: list[bytes]) -> None:
        import torch

        torch.manual_seed(spec.seed)
        transform = train_transform(int(cfg["image_size"]), cfg["normalize"])
        batch = max(1, int(cfg["batch"]))

        def batches():
            i = 0
            while True:
                yield [images[(i + k) % len(images)] for k in range(batch)]
                i += batch

        # This thread's CPU time in the per-image work, timed as the loader workers time theirs
        # (workloads.image_loader.ImageSamples.decode_counters), so the two compare without the wall clock.
        decoding = {"decode_cpu_seconds": 0.0, "decoded_images": 0.0}

        def step(chunk) -> float:
            t0 = time.thread_time()
            for data in chunk:
                transform(decode_rgb(data))
            decoding["decode_cpu_seconds"] += time.thread_time() - t0
            decoding["decoded_images"] += len(chunk)
            return float(len(chunk))

        meter = new_meter(spec, cfg, int(cfg["warmup_steps"]), "cpu")
        meter.track(lambda: dict(decoding), decode_cost)
        run_epochs(meter, batches(), step, StepClock("cpu"), {})
        meter.finish(result, 1)
        result.extra["images_bytes"] = sum(len(d) for d in images)


def calibration_method(cfg: dict) -> str:
    """What one calibrated image costs, in words: figures of two methods do not compare."""
    tail = "uint8 HWC" if cfg.get("normalize", "device") == "device" else "ToTensor + Normalize"
    return f"PIL decode + RandomResizedCrop({int(cfg['image_size'])}) + flip + {tail}"


def _calibration_images(cfg: dict) -> list[bytes]:
    from workloads.synth import synth_jpeg

    return [synth_jpeg(int(cfg["seed"]), i) for i in range(int(cfg["images"]))]


def _decode_until(cpu: int, cfg: dict, stop: Any, ready: Any, out: Any, images: list[bytes]) -> None:
    """A neighbour: the calibration loop pinned to `cpu` until `stop` is set; signals `ready` once
    it decodes, then puts its images/s."""
    import time

    import torch

    os.sched_setaffinity(0, {cpu})
    torch.set_num_threads(1)
    transform = train_transform(int(cfg["image_size"]), cfg["normalize"])
    transform(decode_rgb(images[0]))
    ready.release()
    done, i = 0, 0
    t0 = time.perf_counter()
    while not stop.is_set():
        transform(decode_rgb(images[i % len(images)]))
        i += 1
        done += 1
    out.put(done / (time.perf_counter() - t0))


@contextlib.contextmanager
def busy_neighbours(cpus: list[int], cfg: dict, images: list[bytes] | None = None) -> Iterator[list[float]]:
    """Run the calibration loop on `cpus` (one process each; over `images` instead of the fixed
    calibration set when given) for the duration of the block, which starts once every one of them
    is decoding (a neighbour still starting would leave its CPU idle, and on a shared host an idle
    neighbour flatters the CPU beside it); the list it yields is filled with their images/s when the
    block ends."""
    rates: list[float] = []
    if not cpus:
        yield rates
        return
    import multiprocessing as mp

    images = images or _calibration_images(cfg)  # made once, here: the forked neighbours share them
    ctx = mp.get_context("fork")
    stop, ready, out = ctx.Event(), ctx.Semaphore(0), ctx.Queue()
    procs = [ctx.Process(target=_decode_until, args=(cpu, cfg, stop, ready, out, images), daemon=True) for cpu in cpus]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            if not ready.acquire(timeout=60):
                break  # a neighbour that never started: measure beside those that did
        yield rates
    finally:
        stop.set()
        for _ in procs:
            try:
                rates.append(float(out.get(timeout=30)))
            except Exception:  # a neighbour that died leaves its rate out; the others still count
                break
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
