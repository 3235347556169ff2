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
form: the GPU's own inference rate, which a sweep measures as the workload's ceiling. Without that
point a sweep's model cannot tell the GPU's level from the level its CPU-bound points reach at the
largest shape (on an H100, 2,644 images/s fitted where the GPU infers 12,800 a second).
"""

from __future__ import annotations

import time
from typing import Any

from workloads import distributed, stats
from workloads.distributed import STREAMS, run_ranks
from workloads.formats.readers import with_format_modules
from workloads.gpu_memory_use import allocator_peaks
from workloads.image_loader import INPUTS, TORCH_IMAGE_MODULES, Feed, image_feed, open_images, run_feed
from workloads.image_transforms import NORMALIZE, DeviceInput, eval_transform
from workloads.kernel_split import record_split
from workloads.loop import is_cuda, synthetic_batches
from workloads.measure import add_read_bytes_per_sample, bottleneck_label, stage_done
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, SYNTHETIC_INPUT, Range, Result, Spec, Workload, register
from workloads.torch_common import (
    ARCH_KWARGS,
    DEVICES,
    PRECISIONS,
    autocast,
    build_cnn,
    check_choice,
    framework_versions,
    prefer_sleeping_openmp,
    setup_device,
    synthetic_images,
)


def profiles(arch: str, gpu_size: int, gpu_resize: int, small_model: str, small_size: int, small_resize: int):
    common = {"input": "files", "split": "val", "workers": None, "prefetch_factor": 2, "read_threads": 4,
              "assemble_batches": True, "recycle_batches": True, "pin_workers": False, "in_order": True,
              "warmup_steps": 3, "normalize": "device",
              "drain": True}  # the window opens once the batches read before it are taken (workloads.loop.drain_ready)
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
            "cudnn_benchmark": False,  # cuDNN's autotuning (workloads.torch_common.setup_device)
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
    multi_gpu = STREAMS  # one independent process per GPU, each on its shard (workloads.distributed)
    inputs = INPUTS  # synthetic too: a sweep's ceiling point (sizer.shapes.wants_ceiling)
    choices = {"input": INPUTS, "normalize": NORMALIZE, "model": tuple(ARCH_KWARGS), "device": DEVICES,
               "precision": PRECISIONS}
    setting_types = {"workers": (int, type(None))}
    ranges = {"workers": NOT_NEGATIVE, "prefetch_factor": AT_LEAST_ONE, "read_threads": NOT_NEGATIVE,
              "warmup_steps": NOT_NEGATIVE, "image_size": Range(32), "resize": Range(32), "batch_size": AT_LEAST_ONE}

    requires_modules = TORCH_IMAGE_MODULES

    @classmethod
    def modules_for(cls, profile: str, config: dict[str, Any]) -> tuple[str, ...]:
        """torch, torchvision, PIL and numpy, and the reader of a packed `input` (lmdb)."""
        return with_format_modules(cls.requires_modules, {**cls.defaults.get(profile, {}), **config}.get("input"))

    def prepare(self, spec: Spec) -> None:
        cfg = self.config_for(spec)
        if cfg["input"] != SYNTHETIC_INPUT:
            open_images(spec.data_dir, cfg["input"], cfg["split"])

    def run(self, spec: Spec) -> Result:
        if spec.gpus > 1:  # before torch is imported: the streams are forked from this process
            return run_ranks(self, spec)
        cfg = self.config_for(spec)
        source = check_choice(cfg, "input", INPUTS)
        normalize = check_choice(cfg, "normalize", NORMALIZE)
        result = self.new_result(spec, cfg)
        result.extra["openmp_sleeps"] = prefer_sleeping_openmp(cfg)
        import torch  # noqa: F401  (imported here, timed as its own stage)

        stage_done("torch_imported")
        device = setup_device(cfg, spec.vcpus, spec.seed)
        channels_last = bool(cfg["channels_last"])
        size, batch_size = int(cfg["image_size"]), int(cfg["batch_size"])
        if source == SYNTHETIC_INPUT:
            feed = Feed(synthetic_batches(lambda: (synthetic_images(batch_size, size, device, channels_last), None)),
                        warmup=int(cfg["warmup_steps"]) + 2)
        else:
            # The loader first: its workers fork and fill the prefetch queue while the model is
            # built and the CUDA context made, not after.
            feed = image_feed(spec, cfg, source, eval_transform(size, int(cfg["resize"]), normalize), result.extra,
                              pin_memory=is_cuda(device), shuffle=False, in_order=bool(cfg.get("in_order", True)))
        batches = iter(feed.loader)
        stage_done("data_opened")
        model = build_cnn(cfg["model"], device, channels_last, aux_logits=False)
        model.eval()
        stage_done("model_built")
        result.extra["versions"] = framework_versions()
        # Synthetic batches are made on the device, already in the model's form.
        to_input = DeviceInput(device, normalize, channels_last) if feed.loader_fed else None
        timed = _TimedInference(model, device, cfg["precision"], to_input)
        run_feed(spec, cfg, device, feed, batches, timed, result)
        timed.report(result.extra, feed.warmup)
        if not feed.loader_fed and is_cuda(device) and distributed.current() is None:  # a GPU ceiling
            record_split(result.counters, _forward(model, next(batches)[0], device, cfg["precision"]), float(batch_size),
                         cfg["precision"])
        result.counters.update(allocator_peaks())
        add_read_bytes_per_sample(result)
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result


def _forward(model: Any, x: Any, device: str, precision: str):
    """One inference step on a batch already in the model's form, as `_TimedInference` runs it."""
    import torch

    def forward() -> Any:
        with torch.inference_mode(), autocast(device, precision):
            return model(x).argmax(dim=1)

    return forward


class _TimedInference:
    """A step of batch inference: the model's top-1 over a batch, without gradients, its latency
    from host batch in to logits ready (on a GPU, CUDA events read once all are complete)."""

    def __init__(self, model: Any, device: str, precision: str, to_input: DeviceInput | None):
        self.model = model
        self.device = device
        self.precision = precision
        self.to_input = to_input
        self.cuda = is_cuda(device)
        self.latencies_s: list[float] = []  # CPU: measured directly
        self.events: list[tuple[Any, Any]] = []  # GPU: (start, end) pairs

    def __call__(self, batch: Any) -> float:
        import torch

        x, _ = batch
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        with torch.inference_mode(), autocast(self.device, self.precision):
            x = x if self.to_input is None else self.to_input(x)
            logits = self.model(x)
            logits.argmax(dim=1)  # top-1, as a classifier's caller would
        if self.cuda:
            end.record()
            self.events.append((start, end))
        else:
            self.latencies_s.append(time.perf_counter() - t0)
        return float(x.shape[0])

    def report(self, extra: dict[str, Any], warmup: int) -> None:
        """p50 and p99 of the batch latency past the first `warmup` batches (all of them where no
        more ran)."""
        latencies_s = self.latencies_s
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            latencies_s = [start.elapsed_time(end) / 1000.0 for start, end in self.events]
        measured = latencies_s[warmup:] or latencies_s
        if measured:
            extra["batch_latency_p50_ms"] = stats.percentile(measured, 50) * 1000.0
            extra["batch_latency_p99_ms"] = stats.percentile(measured, 99) * 1000.0
            extra["latency_batches"] = len(measured)


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
