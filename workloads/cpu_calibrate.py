"""Per-vCPU calibration (`cpu-calibrate`): one vCPU's JPEG decode-and-augment rate, images/s.

The same work a training loader worker does per image (PIL decode, RandomResizedCrop to 224,
horizontal flip, to tensor, normalize), on a fixed set of generated ImageNet-like JPEGs held in
memory (so the disk never enters), in one process pinned to one of the CPUs it may use, with one
torch thread. Two hosts' figures give the ratio by which a CPU-bound term measured on one host
scales to the other's CPU model. Both profiles run the same measurement: it describes the host.
"""

from __future__ import annotations

import os

from workloads import torch_common as tc
from workloads.measure import bottleneck_label
from workloads.protocol import Result, Spec, Workload, register

CALIBRATION_SEED = 20180  # fixed: every host decodes the very same images


@register
class CpuCalibrate(Workload):
    name = "cpu-calibrate"
    framework = "pillow"
    unit = "images/s"
    description = "One vCPU's JPEG decode + RandomResizedCrop(224) + flip rate on fixed generated images"
    dataset = ""
    stresses = "CPU (one vCPU)"
    _common = {"images": 48, "batch": 8, "image_size": 224, "seed": CALIBRATION_SEED, "warmup_steps": 2, "pin": True}
    defaults = {"gpu": dict(_common), "cpu-small": dict(_common)}

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)

        import torch

        allowed = sorted(os.sched_getaffinity(0))
        threads = torch.get_num_threads()
        if cfg.get("pin", True):
            os.sched_setaffinity(0, {allowed[0]})  # one vCPU, whatever the shape allows
        torch.set_num_threads(1)
        try:
            self._measure(spec, cfg, result)
        finally:  # a worker is a fresh process, but an in-process caller gets its CPUs back
            os.sched_setaffinity(0, allowed)
            torch.set_num_threads(threads)
        result.extra.update(
            cpu=allowed[0] if cfg.get("pin", True) else None,
            cpus_allowed=len(allowed),
            versions=tc.framework_versions(),
        )
        result.bottleneck = bottleneck_label(result.counters, 1)
        return result

    def _measure(self, spec: Spec, cfg: dict, result: Result) -> None:
        import torch

        from workloads.synth import synth_jpeg

        torch.manual_seed(spec.seed)
        images = [synth_jpeg(int(cfg["seed"]), i) for i in range(int(cfg["images"]))]
        transform = tc.train_transform(int(cfg["image_size"]))
        batch = max(1, int(cfg["batch"]))

        def batches():
            i = 0
            while True:
                yield [images[(i + k) % len(images)] for k in range(batch)]
                i += batch

        def step(chunk) -> float:
            for data in chunk:
                transform(tc.decode_rgb(data))
            return float(len(chunk))

        meter = tc.new_meter(spec, cfg, int(cfg["warmup_steps"]), "cpu")
        tc.run_epochs(meter, batches(), step, tc.StepClock("cpu"), {})
        meter.finish(result, 1)
        result.extra["images_bytes"] = sum(len(d) for d in images)
