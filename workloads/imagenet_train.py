"""ImageNet-style CNN training: `<model>-train` for alexnet, vgg16, googlenet, resnet50 and
inception_v3 (torchvision architectures, random init, real SGD steps).

Input (config `input`): JPEG files (`files`) or packed shards (`lmdb`, `rec`, `tar`) under
spec.data_dir, read by a DataLoader whose workers read each batch's files ahead on a few threads
(config `read_threads`) and decode and augment (RandomResizedCrop, flip, to uint8 tensor; the
training process normalizes on the device, or the workers do with `normalize: worker`); or
`synthetic`, one random batch kept on the device, which measures the GPU's own ceiling.
`decode: gpu` has the workers only read bytes and decodes them with nvjpeg
(torchvision.io.decode_jpeg on CUDA), augmenting on the GPU.

Profiles: `gpu` trains the named architecture at its usual resolution in bf16 autocast with
channels-last tensors; `cpu-small` runs a cheaper model of the same family at low resolution in
fp32, so a point finishes in seconds on two cores. The result's config names the model and image
size that actually ran.
"""

from __future__ import annotations

import collections
from typing import Any

from workloads import distributed
from workloads.batch_buffers import RegisteredCopy, use_registered_buffers
from workloads.distributed import DATA_PARALLEL, data_parallel, run_ranks
from workloads.formats.readers import with_format_modules
from workloads.gpu_augment import GpuAugment, collate_raw
from workloads.gpu_memory_use import allocator_peaks
from workloads.image_loader import DECODERS, INPUTS, TORCH_IMAGE_MODULES, Feed, ImageSamples, image_feed, open_images, run_feed
from workloads.image_transforms import NORMALIZE, DeviceInput, train_transform
from workloads.kernel_split import record_split
from workloads.loop import is_cuda, synthetic_batches
from workloads.measure import add_read_bytes_per_sample, bottleneck_label, stage_done
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, SHARE, SYNTHETIC_INPUT, Range, Result, Spec, Workload, register
from workloads.torch_common import (
    ARCH_KWARGS,
    DEVICES,
    NUM_CLASSES,
    PRECISIONS,
    build_cnn,
    check_choice,
    cnn_sgd_step,
    framework_versions,
    prefer_sleeping_openmp,
    setup_device,
    synthetic_images,
)


def profiles(
    arch: str,
    gpu_size: int,
    gpu_batch: int,
    small_model: str,
    small_size: int,
    small_batch: int,
    lr: float,
    small_extra: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    common = {
        "input": "files",
        "decode": "cpu",
        "normalize": "device",  # workers hand over uint8; see workloads.image_transforms
        "split": "train",
        "workers": None,  # None: one loader worker per vCPU of the shape
        "prefetch_factor": 2,
        "read_threads": 4,  # per loader worker: a batch's files read ahead of its decoding (workloads.image_loader)
        "assemble_batches": True,  # uint8 batches written image by image into shared memory (workloads.image_loader)
        "recycle_batches": True,  # each worker fills its shared-memory batches again (workloads.batch_buffers.BatchRecycler)
        "pin_workers": False,  # True: each loader worker on a vCPU of its own (workloads.image_loader.pin_worker)
        # Batches copied to the GPU straight from the recycled buffers, no pin-memory thread
        # (workloads.batch_buffers.use_registered_buffers): "auto" where the pipeline allows, true, false.
        "register_buffers": "auto",
        "in_order": False,  # batches taken as the workers finish them (workloads.image_loader.make_loader)
        "warmup_steps": 3,  # beyond the prefetch depth
        "drain": True,  # the window opens once the batches read before it are taken (workloads.loop.drain_ready)
        "lr": lr,
        "momentum": 0.9,
        "weight_decay": 1e-4,
    }
    gpu = {
        **common,
        "model": arch,
        "image_size": gpu_size,
        "batch_size": gpu_batch,
        "device": "cuda",
        "precision": "bf16",
        "channels_last": True,
        "cudnn_benchmark": False,  # cuDNN's autotuning (workloads.torch_common.setup_device)
    }
    small = {
        **common,
        "model": small_model,
        "image_size": small_size,
        "batch_size": small_batch,
        "device": "cpu",
        "precision": "fp32",
        "channels_last": False,
        **(small_extra or {}),
    }
    return {"gpu": gpu, "cpu-small": small}


class ImagenetTrain(Workload):
    framework = "pytorch"
    unit = "images/s"
    dataset = "imagenet"
    multi_gpu = DATA_PARALLEL  # one process per GPU, DistributedDataParallel (workloads.distributed)
    stresses = "GPU, CPU decode, then disk, RAM"
    choices = {"input": INPUTS, "decode": DECODERS, "normalize": NORMALIZE, "model": tuple(ARCH_KWARGS),
               "device": DEVICES, "precision": PRECISIONS, "register_buffers": ("auto", True, False)}
    setting_types = {"workers": (int, type(None))}
    ranges = {"workers": NOT_NEGATIVE, "prefetch_factor": AT_LEAST_ONE, "read_threads": NOT_NEGATIVE,
              "warmup_steps": NOT_NEGATIVE, "image_size": Range(32), "batch_size": AT_LEAST_ONE, "lr": NOT_NEGATIVE,
              "momentum": SHARE, "weight_decay": NOT_NEGATIVE}
    requires = {("decode", "gpu"): ("device", "cuda")}  # nvjpeg decodes on a CUDA device

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
        if spec.gpus > 1:  # before torch is imported: the ranks are forked from this process
            return run_ranks(self, spec)
        cfg = self.config_for(spec)
        source = check_choice(cfg, "input", INPUTS)
        decode = check_choice(cfg, "decode", DECODERS)
        normalize = check_choice(cfg, "normalize", NORMALIZE)
        result = self.new_result(spec, cfg)
        result.extra["openmp_sleeps"] = prefer_sleeping_openmp(cfg)
        import torch  # noqa: F401  (imported here, timed as its own stage)

        stage_done("torch_imported")
        device = setup_device(cfg, spec.vcpus, spec.seed)
        cuda = is_cuda(device)
        if decode == "gpu" and not cuda:
            raise ValueError("decode=gpu needs device=cuda (the gpu profile)")
        synthetic = source == SYNTHETIC_INPUT
        gpu_decode = decode == "gpu" and not synthetic
        register = not synthetic and use_registered_buffers(cfg, cuda, gpu_decode, normalize)
        # The loader first: its workers fork and fill the prefetch queue while the model is built
        # and the CUDA context made (about 4 s on an H200 host), not after.
        if synthetic:
            feed = _synthetic_feed(cfg, device)
        else:
            transform = None if gpu_decode else train_transform(int(cfg["image_size"]), normalize)
            feed = image_feed(spec, cfg, source, transform, result.extra, pin_memory=cuda and not gpu_decode and not register,
                              shuffle=True, in_order=bool(cfg.get("in_order", False)),
                              collate_fn=collate_raw if gpu_decode else None)
        batches = iter(feed.loader)
        stage_done("data_opened")
        sgd_step = _sgd_step(cfg, device)
        result.extra["versions"] = framework_versions()
        to_model = _ModelInput(cfg, device, normalize, synthetic, gpu_decode, feed.dataset if register else None,
                               spec.seed)
        losses = _Losses()

        def step(batch) -> float:
            x, y = to_model(batch)
            losses.add(sgd_step(x, y))
            return float(x.shape[0])

        try:
            run_feed(spec, cfg, device, feed, batches, step, result)
            if synthetic and cuda and distributed.current() is None:  # a GPU ceiling: where its time goes
                record_split(result.counters, lambda: sgd_step(*next(batches)), float(cfg["batch_size"]), cfg["precision"])
        finally:
            to_model.close(result.extra)
        result.counters.update(allocator_peaks())
        losses.report(result.extra)
        add_read_bytes_per_sample(result)
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result


def _synthetic_feed(cfg: dict[str, Any], device: str) -> Feed:
    """One random batch of images and labels, kept on the device (input: synthetic)."""
    import torch

    size, batch_size = int(cfg["image_size"]), int(cfg["batch_size"])

    def make_batch():
        x = synthetic_images(batch_size, size, device, bool(cfg["channels_last"]))
        return x, torch.randint(0, NUM_CLASSES, (batch_size,), device=device)

    return Feed(synthetic_batches(make_batch), warmup=int(cfg["warmup_steps"]) + 2)


def _sgd_step(cfg: dict[str, Any], device: str):
    """The model, built on the device in training mode, and its SGD step (`cnn_sgd_step`)."""
    import torch

    model = build_cnn(cfg["model"], device, bool(cfg["channels_last"]), aux_logits=cfg.get("aux_logits"))
    model.train()
    model = data_parallel(model, device)  # in a rank of a multi-GPU point; the model itself otherwise
    stage_done("model_built")
    optimizer = torch.optim.SGD(
        model.parameters(), lr=float(cfg["lr"]), momentum=float(cfg["momentum"]), weight_decay=float(cfg["weight_decay"])
    )
    return cnn_sgd_step(model, optimizer, device, cfg["precision"])


class _ModelInput:
    """A loader batch -> (the model's input on the device, labels): decoded and augmented on the
    GPU (`decode: gpu`), or copied there (straight from the worker's registered buffer when
    `registered_from` holds the dataset) and normalized; synthetic batches are the model's form
    already."""

    def __init__(self, cfg: dict[str, Any], device: str, normalize: str, synthetic: bool, gpu_decode: bool,
                 registered_from: ImageSamples | None, seed: int):
        self.gpu_augment = GpuAugment(int(cfg["image_size"]), device, seed) if gpu_decode else None
        self.to_input = None if synthetic else DeviceInput(device, normalize, bool(cfg["channels_last"]))
        self.registered = None if registered_from is None else RegisteredCopy(registered_from.recycler, device)

    def __call__(self, batch: Any) -> tuple[Any, Any]:
        if self.gpu_augment is not None:
            flat, lengths, y = batch
            return self.gpu_augment(flat, lengths), y
        x, y = batch
        if self.to_input is None:
            return x, y
        return self.to_input(x if self.registered is None else self.registered(x)), y

    def close(self, extra: dict[str, Any]) -> None:
        """Unregister the buffers, reporting how many were registered and how many batches came
        from fresh blocks instead."""
        if self.registered is not None:
            extra["registered_buffers"] = len(self.registered.registered)
            extra["pageable_batches"] = self.registered.pageable
            self.registered.close()


class _Losses:
    """The first and the last few steps' losses, kept on the device until the point ends."""

    KEEP = 5

    def __init__(self):
        self.first: list[Any] = []
        self.last: collections.deque = collections.deque(maxlen=self.KEEP)

    def add(self, loss: Any) -> None:
        (self.first if len(self.first) < self.KEEP else self.last).append(loss.detach())

    def report(self, extra: dict[str, Any]) -> None:
        import torch

        extra["loss_first"] = float(torch.stack(self.first).float().mean()) if self.first else None
        extra["loss_last"] = float(torch.stack(list(self.last)).float().mean()) if self.last else None


@register
class AlexNetTrain(ImagenetTrain):
    name = "alexnet-train"
    description = "AlexNet training on ImageNet-style JPEGs"
    defaults = profiles("alexnet", 224, 256, "alexnet", 112, 16, lr=0.01)


@register
class Vgg16Train(ImagenetTrain):
    name = "vgg16-train"
    description = "VGG-16 training on ImageNet-style JPEGs"
    defaults = profiles("vgg16", 224, 128, "vgg16", 64, 8, lr=0.01)


@register
class GoogLeNetTrain(ImagenetTrain):
    name = "googlenet-train"
    description = "GoogLeNet (Inception v1, no auxiliary heads) training on ImageNet-style JPEGs"
    defaults = profiles("googlenet", 224, 256, "googlenet", 112, 16, lr=0.1)


@register
class ResNet50Train(ImagenetTrain):
    name = "resnet50-train"
    description = "ResNet-50 training on ImageNet-style JPEGs (cpu-small: ResNet-18 at 112 px)"
    defaults = profiles("resnet50", 224, 256, "resnet18", 112, 16, lr=0.1)


@register
class InceptionV3Train(ImagenetTrain):
    name = "inception_v3-train"
    description = "Inception v3 training at 299 px with its auxiliary head on ImageNet-style JPEGs"
    # cpu-small: 112 px, too small for the auxiliary head (it needs the 17x17 grid of 299 px input).
    defaults = profiles("inception_v3", 299, 128, "inception_v3", 112, 16, lr=0.1, small_extra={"aux_logits": False})
