"""MXNet Inception v3 training (`mxnet-inception-v3-train`) over RecordIO shards, as MXNet users
train ImageNet: im2rec's `.rec`/`.idx` read by `mx.io.ImageRecordIter` (JPEG decode and
augmentation on `preprocess_threads` C++ threads: a random resized crop, MXNet's equivalent of
RandomResizedCrop, and a random mirror), a Gluon model-zoo network, real SGD steps.

MXNet runs on the CPU here, in its own interpreter (.venv-mxnet, `make mxnet-env`): `mxnet==1.9.1`
needs numpy 1.23.5, and its CUDA builds target CUDA 11.2, which the driver stacks of current GPU
hosts (H100/H200, CUDA 12 and later) do not pair with. So both profiles measure CPU training; the
gpu profile keeps the real network and resolution (Inception v3 at 299 px), cpu-small a ResNet-18 at
112 px so a point takes seconds on two cores.

Reads `<data_dir>/packed/rec/<split>.rec` and `.idx` (`sizer data pack DIR --format rec`).
Imports only the standard library, numpy, mxnet (inside functions) and workloads.*.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from workloads.formats.readers import RecordIOReader, packed_paths
from workloads.loop import StepClock, new_meter, run_epochs
from workloads.measure import add_read_bytes_per_sample, bottleneck_label
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, SHARE, Range, Result, Spec, Workload, register

CPU_ONLY_REASON = (
    "MXNet 1.9.1's CUDA builds target CUDA 11.2, which this GPU host's driver stack does not pair with: "
    "MXNet runs on the CPU"
)
IMAGENET_MEAN_RGB = (123.68, 116.779, 103.939)
IMAGENET_STD_RGB = (58.393, 57.12, 57.375)
NUM_CLASSES = 1000


def import_mxnet(threads: int):
    """Import mxnet with its operator thread pool sized to the shape. OpenMP reads the variable
    when the library loads, so it must be set first (a worker is a fresh process)."""
    os.environ["OMP_NUM_THREADS"] = str(max(1, int(threads)))
    os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
    import mxnet

    return mxnet


def mxnet_versions(mx: Any) -> dict[str, str]:
    import numpy

    features = mx.runtime.Features()
    return {
        "mxnet": mx.__version__,
        "numpy": numpy.__version__,
        "mkldnn": str(features.is_enabled("MKLDNN")),
        "cuda": str(features.is_enabled("CUDA")),
    }


def rec_paths(data_dir: str, split: str) -> tuple[Path, Path]:
    if not data_dir:
        raise ValueError("spec.data_dir is empty: point it at a dataset made by `sizer data imagenet`")
    rec, idx, _ = packed_paths(Path(data_dir) / "packed", "rec", split)
    for path in (rec, idx):
        if not path.is_file():
            raise ValueError(f"missing {path}: pack the dataset with `sizer data pack {data_dir} --format rec`")
    return rec, idx


class RecordBatches:
    """Epochs of an ImageRecordIter as an iterable with a length (batches per epoch), so the
    shared epoch loop can tell the first (cold) pass from later ones."""

    def __init__(self, it: Any, records: int, batch_size: int):
        self.it = it
        self.batches = max(1, records // batch_size)
        self._fresh = True  # the iterator has prefetched its first batch: no reset before epoch one

    def __len__(self) -> int:
        return self.batches

    def __iter__(self):
        if not self._fresh:
            self.it.reset()
        self._fresh = False
        return iter(self.it)


@register
class MxnetInceptionV3Train(Workload):
    name = "mxnet-inception-v3-train"
    framework = "mxnet"
    interpreter = "mxnet"
    requires_modules = ("mxnet", "numpy")
    unit = "images/s"
    dataset = "imagenet"
    description = (
        "MXNet Gluon Inception v3 training over RecordIO shards with ImageRecordIter, on the CPU "
        "(cpu-small: ResNet-18 v1 at 112 px)"
    )
    stresses = "CPU (decode threads and the network itself), then disk"
    _common = {
        "input": "rec",  # the packed format this workload reads (sizer packs it before the sweep)
        "split": "train",
        "device": "cpu",
        "preprocess_threads": None,  # None: one decode thread per vCPU of the shape
        "threads": None,  # operator (OpenMP) threads; None: one per vCPU
        "crop": "random_resized",  # or "rand_crop": a fixed-size random crop of the short-side-resized image
        "rand_mirror": True,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "base_lr": 0.1,  # per 256 images; scaled linearly with the batch size
        "warmup_steps": 2,  # on top of the prefetch depth
        "hybridize": True,
    }
    choices = {"input": ("rec",), "device": ("cpu",), "crop": ("random_resized", "rand_crop")}
    setting_types = {"preprocess_threads": (int, type(None)), "threads": (int, type(None))}
    ranges = {"preprocess_threads": AT_LEAST_ONE, "threads": AT_LEAST_ONE, "momentum": SHARE,
              "weight_decay": NOT_NEGATIVE, "base_lr": NOT_NEGATIVE, "warmup_steps": NOT_NEGATIVE, "image_size": Range(32),
              "batch_size": AT_LEAST_ONE, "prefetch_buffer": AT_LEAST_ONE}
    defaults = {
        "gpu": {**_common, "model": "inceptionv3", "image_size": 299, "batch_size": 32, "prefetch_buffer": 4},
        "cpu-small": {**_common, "model": "resnet18_v1", "image_size": 112, "batch_size": 16, "prefetch_buffer": 2},
    }

    def prepare(self, spec: Spec) -> None:
        cfg = self.config_for(spec)
        rec_paths(spec.data_dir, cfg["split"])

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        _check_config(cfg)
        rec, idx = rec_paths(spec.data_dir, cfg["split"])
        vcpus = max(1, int(spec.vcpus))
        decode_threads = int(cfg["preprocess_threads"] or vcpus)
        op_threads = int(cfg["threads"] or vcpus)
        mx = import_mxnet(op_threads)
        mx.random.seed(spec.seed)
        batch_size = int(cfg["batch_size"])
        records = len(RecordIOReader(rec, idx))
        if records < batch_size:
            raise ValueError(f"{rec} has {records} records, fewer than one batch of {batch_size}")
        it = _record_iter(mx, cfg, rec, idx, decode_threads, spec.seed)
        training = _GluonTraining(mx, cfg)
        extra = result.extra
        extra.update(
            versions=mxnet_versions(mx),
            device="cpu",
            device_note=CPU_ONLY_REASON,
            preprocess_threads=decode_threads,
            operator_threads=op_threads,
            dataset_images=records,
            dataset_gib=sum(p.stat().st_size for p in (rec, idx)) / 2**30,
            learning_rate=training.lr,
        )
        meter = new_meter(spec, cfg, int(cfg["prefetch_buffer"]) + int(cfg["warmup_steps"]), "cpu")
        t0 = time.perf_counter()
        run_epochs(meter, RecordBatches(it, records, batch_size), training.step, StepClock("cpu"), extra)
        meter.finish(result, vcpus)
        extra["loop_seconds"] = time.perf_counter() - t0
        training.report(extra)
        add_read_bytes_per_sample(result)
        result.bottleneck = bottleneck_label(result.counters, vcpus)
        return result


def _check_config(cfg: dict[str, Any]) -> None:
    if cfg["device"] != "cpu":
        raise ValueError(f"config device={cfg['device']!r}: {CPU_ONLY_REASON}")
    if cfg["crop"] not in ("random_resized", "rand_crop"):
        raise ValueError(f"config crop={cfg['crop']!r} is not random_resized or rand_crop")


def _crop_args(cfg: dict[str, Any], size: int) -> dict[str, Any]:
    """ImageRecordIter's arguments for the configured crop: MXNet's RandomResizedCrop, or a
    fixed-size random crop of the image resized to a short side of 256/224 the crop."""
    if cfg["crop"] == "random_resized":
        return {
            "random_resized_crop": True,
            "min_random_area": 0.08,
            "max_random_area": 1.0,
            "min_aspect_ratio": 3 / 4,
            "max_aspect_ratio": 4 / 3,
        }
    return {"rand_crop": True, "resize": int(size * 256 / 224)}


def _record_iter(mx: Any, cfg: dict[str, Any], rec: Path, idx: Path, decode_threads: int, seed: int) -> Any:
    """The shuffled, augmented and normalized batches of the .rec, decoded on `decode_threads`."""
    size = int(cfg["image_size"])
    return mx.io.ImageRecordIter(
        path_imgrec=str(rec),
        path_imgidx=str(idx),
        data_shape=(3, size, size),
        batch_size=int(cfg["batch_size"]),
        shuffle=True,
        seed=int(seed),
        rand_mirror=bool(cfg["rand_mirror"]),
        preprocess_threads=decode_threads,
        prefetch_buffer=int(cfg["prefetch_buffer"]),
        mean_r=IMAGENET_MEAN_RGB[0],
        mean_g=IMAGENET_MEAN_RGB[1],
        mean_b=IMAGENET_MEAN_RGB[2],
        std_r=IMAGENET_STD_RGB[0],
        std_g=IMAGENET_STD_RGB[1],
        std_b=IMAGENET_STD_RGB[2],
        **_crop_args(cfg, size),
    )


class _GluonTraining:
    """The model-zoo network on the CPU, its SGD trainer (learning rate `base_lr` per 256 images,
    scaled linearly with the batch) and the losses of its steps."""

    def __init__(self, mx: Any, cfg: dict[str, Any]):
        from mxnet import autograd, gluon
        from mxnet.gluon.model_zoo import vision

        self.autograd = autograd
        self.ctx = mx.cpu()
        self.batch_size = int(cfg["batch_size"])
        self.net = vision.get_model(cfg["model"], classes=NUM_CLASSES)
        self.net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), ctx=self.ctx)
        if cfg["hybridize"]:
            self.net.hybridize(static_alloc=True, static_shape=True)
        self.lr = float(cfg["base_lr"]) * self.batch_size / 256
        self.trainer = gluon.Trainer(
            self.net.collect_params(), "sgd",
            {"learning_rate": self.lr, "momentum": float(cfg["momentum"]), "wd": float(cfg["weight_decay"])},
        )
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.losses: list[float] = []

    def step(self, batch: Any) -> float:
        # The iterator hands out pinned host buffers; the network's parameters live on cpu(0).
        x = batch.data[0].as_in_context(self.ctx)
        y = batch.label[0].as_in_context(self.ctx)
        with self.autograd.record():
            out = self.net(x)
            if isinstance(out, (tuple, list)):  # an auxiliary head, when a model has one
                out = out[0]
            loss = self.loss_fn(out, y)
        loss.backward()
        self.trainer.step(self.batch_size)
        self.losses.append(float(loss.mean().asscalar()))  # also waits for the step: MXNet is asynchronous
        return float(self.batch_size - (batch.pad or 0))

    def report(self, extra: dict[str, Any]) -> None:
        """The mean loss of the first and of the last few steps, and the steps run."""
        losses = self.losses
        k = min(5, max(1, len(losses) // 3))
        extra.update(loss_first=sum(losses[:k]) / k, loss_last=sum(losses[-k:]) / k, train_steps=len(losses))
