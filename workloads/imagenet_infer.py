"""Batch inference over validation images read from disk: `<model>-infer` for the training
workloads' architectures.

A DataLoader reads the `val` split (config `split`) from spec.data_dir in one of the image formats,
and its workers decode, resize and center-crop (256 -> 224 on the GPU profile, 128 -> 112 on
cpu-small) and hand over uint8 images that the main process normalizes on the device
(`normalize: worker` does it in the workers, as torchvision's reference does); the model runs
without gradients in eval mode, in bf16 autocast with channels-last tensors on the GPU. Reports
images/s and the per-batch latency (host batch in, logits ready; GPU time measured with CUDA events)
at p50 and p99.

`input: synthetic` runs the model on one random batch kept on the device, already in the model's
form: the GPU's own inference rate, which a sweep measures as the workload's ceiling. Without it
the model of a sweep took the level its CPU-bound points reached at 16 vCPUs for the GPU's (seen on
an H100: 2,644 images/s fitted, where the GPU infers 12,800 a second).
"""

from __future__ import annotations

import time
from typing import Any

from workloads import stats
from workloads import torch_common as tc
from workloads.measure import bottleneck_label, stage_done
from workloads.protocol import Result, Spec, Workload, register


def profiles(arch: str, gpu_size: int, gpu_resize: int, small_model: str, small_size: int, small_resize: int):
    common = {"input": "files", "split": "val", "workers": None, "prefetch_factor": 2, "read_threads": 4,
              "assemble_batches": True, "recycle_batches": True, "pin_workers": False, "in_order": True,
              "warmup_steps": 3, "normalize": "device",
              "drain": True}  # the window opens once the batches read before it are taken (torch_common.drain_ready)
    return {
        "gpu": {
            **common,
            "model": arch,
            "image_size": gpu_size,
            "resize": gpu_resize,
            "batch_size": 256,
            "device": "cuda",
            "precision": "bf16",
            "channels_last": True,
            "cudnn_benchmark": False,  # cuDNN's autotuning (torch_common.setup_device)
        },
        "cpu-small": {
            **common,
            "model": small_model,
            "image_size": small_size,
            "resize": small_resize,
            "batch_size": 16,
            "device": "cpu",
            "precision": "fp32",
            "channels_last": False,
        },
    }


class ImagenetInfer(Workload):
    framework = "pytorch"
    unit = "images/s"
    dataset = "imagenet"
    stresses = "disk, CPU decode, GPU"
    reads_once = True  # batch inference sees each input once; sweeps measure its first pass
    inputs = tc.INPUTS  # synthetic too: a sweep's ceiling point (sizer.shapes.wants_ceiling)

    def prepare(self, spec: Spec) -> None:
        cfg = self.config_for(spec)
        if cfg["input"] != "synthetic":
            tc.open_images(spec.data_dir, cfg["input"], cfg["split"])

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        source = tc.check_choice(cfg, "input", tc.INPUTS)
        normalize = tc.check_choice(cfg, "normalize", tc.NORMALIZE)
        result = self.new_result(spec, cfg)
        result.extra["openmp_sleeps"] = tc.prefer_sleeping_openmp(cfg)

        import torch

        stage_done("torch_imported")
        device = tc.setup_device(cfg, spec.vcpus, spec.seed)
        cuda = tc.is_cuda(device)
        channels_last = bool(cfg["channels_last"])

        size, batch_size = int(cfg["image_size"]), int(cfg["batch_size"])
        extra = result.extra
        if source == "synthetic":
            loader: Any = tc.synthetic_batches(lambda: (tc.synthetic_images(batch_size, size, device, channels_last), None))
            workers, samples, dataset = 0, None, None
            warmup = int(cfg["warmup_steps"]) + 2
        else:
            # The loader first: its workers fork and fill the prefetch queue while the model is
            # built and the CUDA context made, not after.
            samples = tc.open_images(spec.data_dir, source, cfg["split"])
            workers = tc.loader_workers(cfg, spec.vcpus)
            dataset = tc.ImageSamples(samples, tc.eval_transform(size, int(cfg["resize"]), normalize),
                                      int(cfg.get("read_threads", 0)), bool(cfg.get("assemble_batches", True)))
            loader = tc.make_loader(
                dataset,
                batch_size,
                workers,
                int(cfg["prefetch_factor"]),
                pin_memory=cuda,
                shuffle=False,
                seed=spec.seed,
                pin_workers=bool(cfg.get("pin_workers", False)),
                recycle_batches=bool(cfg.get("recycle_batches", True)),
                in_order=bool(cfg.get("in_order", True)),
            )
            warmup = tc.warmup_batches(cfg, workers)
            extra.update(
                loader_workers=workers,
                dataset_images=len(samples),
                dataset_gib=tc.dataset_bytes(spec.data_dir, source, cfg["split"]) / 2**30,
            )
        batches = iter(loader)
        stage_done("data_opened")
        model = tc.build_cnn(cfg["model"], device, channels_last, aux_logits=False)
        model.eval()
        stage_done("model_built")
        extra["versions"] = tc.framework_versions()

        # Synthetic batches are made on the device, already in the model's form.
        to_input = None if source == "synthetic" else tc.DeviceInput(device, normalize, channels_last)
        latencies_s: list[float] = []  # CPU: measured directly
        events: list[tuple[Any, Any]] = []  # GPU: (start, end) pairs, read once all are complete

        def step(batch) -> float:
            x, _ = batch
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            else:
                t0 = time.perf_counter()
            with torch.inference_mode(), tc.autocast(device, cfg["precision"]):
                x = x if to_input is None else to_input(x)
                logits = model(x)
                logits.argmax(dim=1)  # top-1, as a classifier's caller would
            if cuda:
                end.record()
                events.append((start, end))
            else:
                latencies_s.append(time.perf_counter() - t0)
            return float(x.shape[0])

        meter = tc.new_meter(spec, cfg, warmup, device, round_steps=workers if source != "synthetic" else 1,
                             loader_fed=source != "synthetic")
        if dataset is not None:
            tc.watch_decoding(meter, dataset)
        with tc.closing_loader(loader):
            tc.run_epochs(meter, batches, step, tc.StepClock(device), extra,
                          pass_samples=len(samples) if samples is not None else None, samples_of=tc.batch_samples)
            meter.finish(result, spec.vcpus)
        if cuda:
            torch.cuda.synchronize()
            latencies_s = [start.elapsed_time(end) / 1000.0 for start, end in events]
        measured = latencies_s[warmup:] or latencies_s
        if measured:
            extra["batch_latency_p50_ms"] = stats.percentile(measured, 50) * 1000.0
            extra["batch_latency_p99_ms"] = stats.percentile(measured, 99) * 1000.0
            extra["latency_batches"] = len(measured)
        samples_measured = result.counters.get("measured_samples") or 0
        if samples_measured:
            extra["read_bytes_per_sample"] = result.counters.get("read_bytes", 0.0) / samples_measured
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result


@register
class AlexNetInfer(ImagenetInfer):
    name = "alexnet-infer"
    description = "AlexNet batch inference over validation JPEGs"
    defaults = profiles("alexnet", 224, 256, "alexnet", 112, 128)


@register
class Vgg16Infer(ImagenetInfer):
    name = "vgg16-infer"
    description = "VGG-16 batch inference over validation JPEGs"
    defaults = profiles("vgg16", 224, 256, "vgg16", 64, 73)


@register
class GoogLeNetInfer(ImagenetInfer):
    name = "googlenet-infer"
    description = "GoogLeNet batch inference over validation JPEGs"
    defaults = profiles("googlenet", 224, 256, "googlenet", 112, 128)


@register
class ResNet50Infer(ImagenetInfer):
    name = "resnet50-infer"
    description = "ResNet-50 batch inference over validation JPEGs (cpu-small: ResNet-18 at 112 px)"
    defaults = profiles("resnet50", 224, 256, "resnet18", 112, 128)


@register
class InceptionV3Infer(ImagenetInfer):
    name = "inception_v3-infer"
    description = "Inception v3 batch inference over validation JPEGs at 299 px"
    defaults = profiles("inception_v3", 299, 342, "inception_v3", 112, 128)
