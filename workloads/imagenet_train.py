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

from workloads import torch_common as tc
from workloads.measure import bottleneck_label, stage_done
from workloads.protocol import Result, Spec, Workload, register


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
        "normalize": "device",  # workers hand over uint8; see torch_common
        "split": "train",
        "workers": None,  # None: one loader worker per vCPU of the shape
        "prefetch_factor": 2,
        "read_threads": 4,  # per loader worker: a batch's files read ahead of its decoding (torch_common)
        "assemble_batches": True,  # uint8 batches written image by image into shared memory (torch_common)
        "recycle_batches": True,  # each worker fills its shared-memory batches again (torch_common.BatchRecycler)
        "pin_workers": False,  # True: each loader worker on a vCPU of its own (torch_common.pin_worker)
        # Batches copied to the GPU straight from the recycled buffers, no pin-memory thread
        # (torch_common.use_registered_buffers): "auto" where the pipeline allows, true, false.
        "register_buffers": "auto",
        "in_order": False,  # batches taken as the workers finish them (torch_common.make_loader)
        "warmup_steps": 3,  # beyond the prefetch depth
        "drain": True,  # the window opens once the batches read before it are taken (torch_common.drain_ready)
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
        "cudnn_benchmark": False,  # cuDNN's autotuning (torch_common.setup_device)
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
    stresses = "GPU, CPU decode, then disk, RAM"

    def prepare(self, spec: Spec) -> None:
        cfg = self.config_for(spec)
        if cfg["input"] != "synthetic":
            tc.open_images(spec.data_dir, cfg["input"], cfg["split"])

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        source = tc.check_choice(cfg, "input", tc.INPUTS)
        decode = tc.check_choice(cfg, "decode", tc.DECODERS)
        normalize = tc.check_choice(cfg, "normalize", tc.NORMALIZE)
        result = self.new_result(spec, cfg)
        result.extra["openmp_sleeps"] = tc.prefer_sleeping_openmp(cfg)

        import torch

        stage_done("torch_imported")
        device = tc.setup_device(cfg, spec.vcpus, spec.seed)
        cuda = tc.is_cuda(device)
        if decode == "gpu" and not cuda:
            raise ValueError("decode=gpu needs device=cuda (the gpu profile)")
        size, batch_size = int(cfg["image_size"]), int(cfg["batch_size"])
        channels_last = bool(cfg["channels_last"])
        extra = result.extra
        gpu_decode = decode == "gpu" and source != "synthetic"
        register = source != "synthetic" and tc.use_registered_buffers(cfg, cuda, gpu_decode, normalize)

        # The loader first: its workers fork and fill the prefetch queue while the model is built
        # and the CUDA context made (about 4 s on an H200 host), not after.
        if source == "synthetic":

            def make_batch():
                x = tc.synthetic_images(batch_size, size, device, channels_last)
                return x, torch.randint(0, tc.NUM_CLASSES, (batch_size,), device=device)

            loader: Any = tc.synthetic_batches(make_batch)
            warmup = int(cfg["warmup_steps"]) + 2
        else:
            samples = tc.open_images(spec.data_dir, source, cfg["split"])
            workers = tc.loader_workers(cfg, spec.vcpus)
            transform = None if gpu_decode else tc.train_transform(size, normalize)
            dataset = tc.ImageSamples(samples, transform, int(cfg.get("read_threads", 0)),
                                      bool(cfg.get("assemble_batches", True)))
            loader = tc.make_loader(
                dataset,
                batch_size,
                workers,
                int(cfg["prefetch_factor"]),
                pin_memory=cuda and not gpu_decode and not register,
                shuffle=True,
                seed=spec.seed,
                collate_fn=tc.collate_raw if gpu_decode else None,
                pin_workers=bool(cfg.get("pin_workers", False)),
                recycle_batches=bool(cfg.get("recycle_batches", True)),
                in_order=bool(cfg.get("in_order", False)),
            )
            warmup = tc.warmup_batches(cfg, workers)
            extra["loader_workers"] = workers
            extra["dataset_images"] = len(samples)
            extra["dataset_gib"] = tc.dataset_bytes(spec.data_dir, source, cfg["split"]) / 2**30
        batches = iter(loader)
        stage_done("data_opened")

        model = tc.build_cnn(cfg["model"], device, channels_last, aux_logits=cfg.get("aux_logits"))
        model.train()
        stage_done("model_built")
        optimizer = torch.optim.SGD(
            model.parameters(), lr=float(cfg["lr"]), momentum=float(cfg["momentum"]), weight_decay=float(cfg["weight_decay"])
        )
        sgd_step = tc.cnn_sgd_step(model, optimizer, device, cfg["precision"])
        extra["versions"] = tc.framework_versions()
        gpu_augment = tc.GpuAugment(size, device, spec.seed) if gpu_decode else None
        # Synthetic batches are made on the device, already in the model's form.
        to_input = None if source == "synthetic" else tc.DeviceInput(device, normalize, channels_last)
        registered = tc.RegisteredCopy(dataset.recycler, device) if register else None
        first_losses: list[Any] = []
        last_losses: collections.deque = collections.deque(maxlen=5)

        def step(batch) -> float:
            if gpu_augment is not None:
                flat, lengths, y = batch
                x = gpu_augment(flat, lengths)
            else:
                x, y = batch
                x = x if to_input is None else to_input(x if registered is None else registered(x))
            loss = sgd_step(x, y)
            (first_losses if len(first_losses) < 5 else last_losses).append(loss.detach())
            return float(x.shape[0])

        meter = tc.new_meter(spec, cfg, warmup, device, round_steps=workers if source != "synthetic" else 1,
                             loader_fed=source != "synthetic")
        if source != "synthetic":
            tc.watch_decoding(meter, dataset)
        try:
            with tc.closing_loader(loader):
                tc.run_epochs(meter, batches, step, tc.StepClock(device), extra, pass_samples=extra.get("dataset_images"),
                              samples_of=tc.batch_samples)
                meter.finish(result, spec.vcpus)  # while loader workers live: their counters count
        finally:
            if registered is not None:
                extra["registered_buffers"] = len(registered.registered)
                extra["pageable_batches"] = registered.pageable
                registered.close()
        extra["loss_first"] = float(torch.stack(first_losses).float().mean()) if first_losses else None
        extra["loss_last"] = float(torch.stack(list(last_losses)).float().mean()) if last_losses else None
        measured = result.counters.get("measured_samples") or 0
        if measured:
            extra["read_bytes_per_sample"] = result.counters.get("read_bytes", 0.0) / measured
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result


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
