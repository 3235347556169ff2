"""Pieces shared by the PyTorch workloads: device and precision setup, the ImageNet-style input
pipeline (DataLoader over JPEG files or packed shards, decode and augmentation on CPU workers or
nvjpeg on the GPU), and the timed loop that feeds `workloads.measure.Meter`.

Decisions that shape every image workload:
- Loader workers = the shape's vCPUs unless the config names `workers`. At 1 vCPU that is still one
  worker process (not decoding in the main process): the worker and the training process share the
  one vCPU, as they would on a 1-vCPU instance running a default loader, and decoding overlaps the
  GPU's step instead of running between steps. The main process also needs CPU (kernel launches,
  the optimizer on CPU hosts), so a shape's vCPUs are shared by both, which is what the shape means.
- The measured window starts after warm-up of at least the prefetch depth in batches
  (workers x prefetch_factor) plus a few steps, so batches read before timing began do not
  flatter the rate. The loader samples pass after pass without ending (EndlessPasses), so its
  workers never drain at an epoch boundary; passes are counted in samples and marked as phases.
- Workers hand batches over as uint8 HWC images and the training process normalizes them on its
  device (config `normalize: device`, the default), as fast loaders do (timm's prefetcher, DALI,
  FFCV). `normalize: worker` is torchvision's reference recipe, ToTensor + Normalize in the worker
  and float batches: on an H200 host that conversion cost the workers about 10% of their per-image
  rate, a float batch is four times the bytes through shared memory and the pin thread, and the
  whole pipeline trained 1.27x (4 vCPUs) to 1.65x (16) faster handing over uint8.
- Loader workers run on any vCPU of the shape, as the scheduler places them (config `pin_workers`
  puts each on one of its own, as each calibration process runs). Pinned, they were preempted a
  third as often, but the pipeline's rate moved with the host, not the setting: +1% to +16% at 4
  to 12 vCPUs on one H200 host, -13% to +4% at 2 to 12 on another (benchmarks/loader_variants.py),
  so the default stays the stock DataLoader's.
- Training on a GPU with CPU decoding copies each batch to the device straight from the loader
  worker's recycled shared-memory buffer, registered with CUDA once (`RegisteredCopy`), instead of
  through the DataLoader's pin-memory thread, and takes batches as the workers finish them
  (`in_order=False`). Together, at 8 vCPUs on two H200 hosts, the pipeline went from 0.88 and
  0.77-0.82 of calibration x vCPUs to 0.94 and 0.91-0.99 (benchmarks/loader_overhead.py,
  benchmarks/loader_variants.py).
- On a GPU, steps are timed as intervals between completions of consecutive steps: after queueing
  step k the loop waits for step k-1 to finish (a CUDA event), so the GPU always has one step queued
  and step times are true GPU-inclusive times, without the stall a full synchronize per step adds.

torch, torchvision and PIL are imported inside functions: importing this module needs none of them.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import random
import sys
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

from workloads.measure import Meter, tree_counters

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGE_INPUTS = ("files", "lmdb", "rec", "tar")
INPUTS = IMAGE_INPUTS + ("synthetic",)
DECODERS = ("cpu", "gpu")
NORMALIZE = ("device", "worker")  # where ToTensor + Normalize happen (see the module's docstring)
NUM_CLASSES = 1000

# torchvision constructor arguments per architecture: random init, and for googlenet no auxiliary
# heads (its torchvision default turns them on only for pretrained weights' sake).
ARCH_KWARGS: dict[str, dict[str, Any]] = {
    "alexnet": {},
    "vgg11": {},
    "vgg16": {},
    "resnet18": {},
    "resnet50": {},
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"aux_logits": True, "init_weights": True},
}


# ---------------------------------------------------------------- config and device
def prefer_sleeping_openmp(cfg: dict[str, Any]) -> bool:
    """On a CPU device the model's OpenMP threads share the shape's vCPUs with the loader workers;
    threads that spin while they wait take CPU from the workers (seen on 2 busy cores: steps 5x
    slower, erratic). Ask OpenMP to sleep instead. It only takes effect before torch is first
    imported, as in a fresh worker; returns whether it did."""
    if cfg.get("device", "cpu") != "cpu" or "torch" in sys.modules:
        return False
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return True


def check_choice(cfg: dict[str, Any], key: str, allowed: Sequence[str]) -> str:
    value = cfg.get(key)
    if value not in allowed:
        raise ValueError(f"config {key}={value!r} is not one of {', '.join(allowed)}")
    return value


def setup_device(cfg: dict[str, Any], vcpus: int, seed: int) -> str:
    """Pick the device (config `device`: cuda or cpu), seed everything and size the main process's
    thread pool to the shape (config `threads` overrides). Returns 'cuda' or 'cpu'."""
    import torch

    device = cfg.get("device", "cpu")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"config device={device!r} is not cpu or cuda")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("the gpu profile needs a CUDA GPU and none is visible (use profile cpu-small)")
        # cuDNN's autotuning (config `cudnn_benchmark`) is off by default: every point is a fresh
        # process, and on an H100 the autotuning took 4.6 s of ResNet-50 training's first step (0.7 s
        # without) for a steady rate no higher (3,976 against 3,987 images/s; benchmarks/worker_start.py).
        torch.backends.cudnn.benchmark = bool(cfg.get("cudnn_benchmark", False))
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.set_num_threads(max(1, int(cfg.get("threads") or vcpus)))
    random.seed(seed)
    torch.manual_seed(seed)
    return device


def is_cuda(device: str) -> bool:
    return device.startswith("cuda")


def autocast(device: str, precision: str):
    """bf16 autocast on the GPU when asked; a no-op context otherwise (fp32)."""
    import torch

    if precision not in ("bf16", "fp32"):
        raise ValueError(f"config precision={precision!r} is not bf16 or fp32")
    if precision == "bf16":
        return torch.autocast(device_type="cuda" if is_cuda(device) else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build_cnn(arch: str, device: str, channels_last: bool, aux_logits: bool | None = None):
    """A torchvision architecture with random weights, on the device. `aux_logits` overrides the
    auxiliary-head default of googlenet and inception_v3."""
    import torch
    import torchvision

    if arch not in ARCH_KWARGS:
        raise ValueError(f"config model={arch!r} is not one of {', '.join(ARCH_KWARGS)}")
    kwargs = dict(ARCH_KWARGS[arch])
    if aux_logits is not None and "aux_logits" in kwargs:
        kwargs["aux_logits"] = bool(aux_logits)
    model = getattr(torchvision.models, arch)(weights=None, num_classes=NUM_CLASSES, **kwargs)
    model = model.to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def logits_and_loss(output: Any, target: Any, loss_fn: Callable) -> Any:
    """Cross-entropy of a model output; Inception v3 in training mode also returns auxiliary
    logits, weighted 0.4 as in its paper and torchvision's reference recipe."""
    aux = getattr(output, "aux_logits", None)
    logits = getattr(output, "logits", output)
    loss = loss_fn(logits, target)
    if aux is not None:
        loss = loss + 0.4 * loss_fn(aux, target)
    return loss


def cnn_sgd_step(model: Any, optimizer: Any, device: str, precision: str) -> Callable[[Any, Any], Any]:
    """One training step of a CNN on an input batch already in the model's form and its labels:
    forward under autocast, cross-entropy, backward, optimizer update. Returns the loss, not
    synchronized (the host runs ahead of the device as a training loop does)."""
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x: Any, y: Any) -> Any:
        y = y.to(device, non_blocking=True)
        with autocast(device, precision):
            loss = logits_and_loss(model(x), y, loss_fn)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


# ---------------------------------------------------------------- input pipeline
def open_images(data_dir: str, fmt: str, split: str) -> Sequence[tuple[bytes, int]]:
    """The (jpeg bytes, label) samples of a dataset split in one of the packed formats."""
    from workloads import formats

    if not data_dir:
        raise ValueError("spec.data_dir is empty: point it at a dataset made by `sizer data imagenet`")
    samples = formats.open_image_dataset(data_dir, fmt, split=split)
    if len(samples) == 0:
        raise ValueError(f"no {split} images in {data_dir} (format {fmt})")
    return samples


def dataset_bytes(data_dir: str, fmt: str, split: str) -> int:
    from workloads import formats

    return formats.dataset_bytes(data_dir, fmt, split)


def decode_rgb(data: bytes):
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    return img.convert("RGB")


class ToHWCUint8:
    """PIL image -> uint8 tensor in HWC order, the bytes as decoded: a batch of these is the
    channels-last layout the device wants, so no worker spends time converting or transposing."""

    def __call__(self, pic: Any):
        import numpy as np
        import torch

        return torch.from_numpy(np.array(pic, dtype=np.uint8, copy=True))


def _to_tensor(normalize: str) -> list:
    from torchvision import transforms as T

    check_choice({"normalize": normalize}, "normalize", NORMALIZE)
    if normalize == "device":
        return [ToHWCUint8()]
    return [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]


def pixel_mean_std(device: str) -> tuple[Any, Any]:
    """ImageNet's mean and std on the 0..255 scale of decoded bytes, shaped to broadcast over NCHW."""
    import torch

    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1) * 255
    return mean, std


def train_transform(size: int, normalize: str = "device"):
    """Decode-side augmentation of the torchvision ImageNet reference recipe (RandomResizedCrop,
    flip), handing over uint8 HWC (`normalize: device`) or normalized float CHW (`worker`)."""
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), *_to_tensor(normalize)])


def eval_transform(size: int, resize: int, normalize: str = "device"):
    from torchvision import transforms as T

    return T.Compose([T.Resize(resize), T.CenterCrop(size), *_to_tensor(normalize)])


class DeviceInput:
    """A loader batch onto the device as the model's input: uint8 HWC batches are copied as bytes,
    then converted to float and normalized there (channels-last by construction: NHWC memory
    seen as NCHW); float CHW batches (`normalize: worker`) are only copied."""

    def __init__(self, device: str, normalize: str, channels_last: bool):
        import torch

        self.device = device
        self.normalize = check_choice({"normalize": normalize}, "normalize", NORMALIZE)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.mean, self.std = pixel_mean_std(device)

    def __call__(self, x: Any):
        x = x.to(self.device, non_blocking=True)
        if self.normalize == "worker":
            return x.contiguous(memory_format=self.memory_format)
        x = x.permute(0, 3, 1, 2).float()  # NHWC bytes -> NCHW view, channels-last memory
        x = (x - self.mean) / self.std
        return x.contiguous(memory_format=self.memory_format)


class ImageSamples:
    """A map-style dataset over (jpeg bytes, label) samples: decoded and transformed in the loader
    worker, or handed on as raw bytes (a uint8 tensor) for decoding on the GPU.

    With `read_threads` > 0 a worker fetching a whole batch (`__getitems__`, which the DataLoader
    calls) reads the batch's records on that many threads ahead of its decoding, so a read from
    disk overlaps the decoding of the images before it instead of leaving the vCPU idle.

    A transform that ends in `ToHWCUint8` (normalize: device) has a batch written image by image
    into one uint8 tensor, in shared memory when in a loader worker (an `ImageBatch`, passed on by
    `collate_images`), instead of a tensor per image that collating then copies again into shared
    memory: one copy of each image's pixels less and no stacking (`assemble=False` keeps the tensor
    per image; on an H200 host it trained at 0.91x and 0.99x the assembled rate at 4 and 8 vCPUs)."""

    def __init__(self, samples: Sequence[tuple[bytes, int]], transform: Callable | None, read_threads: int = 0,
                 assemble: bool = True):
        self.samples = samples
        self.transform = transform
        self.read_threads = max(0, int(read_threads))
        self._to_pixels = _before_uint8(transform) if assemble else None
        self.recycler: BatchRecycler | None = None  # set by make_loader(recycle_batches=True)
        # Set by `closing_loader` once the window is over: a worker drops the batch it is making
        # instead of finishing it (up to a second of decoding at 2 vCPUs) before it may stop. Made
        # here, in the training process, so that forked workers share it.
        self.stop = _shared_flag()
        # CPU seconds the workers' decoding threads spent decoding and augmenting, and the images:
        # the calibration's per-image work timed inside the pipeline (see `decode_counters`).
        self.decoding = _shared_sums(2)

    @property
    def assembles(self) -> bool:
        return self._to_pixels is not None

    def __len__(self) -> int:
        return len(self.samples)

    def _item(self, record: tuple[bytes, int]):
        import torch

        data, label = record
        if self.transform is None:
            return torch.frombuffer(bytearray(data), dtype=torch.uint8), int(label)
        t0 = time.thread_time()
        out = self.transform(decode_rgb(data))
        self._decoded(time.thread_time() - t0, 1)
        return out, int(label)

    def _decoded(self, cpu_seconds: float, images: int) -> None:
        with self.decoding.get_lock():
            self.decoding[0] += cpu_seconds
            self.decoding[1] += images

    def decode_counters(self) -> dict[str, float]:
        """Cumulative CPU seconds the loader workers spent decoding and augmenting images (the
        thread's own CPU time, as the calibration's loop spends it) and the images so decoded. Over
        a window, their ratio against the calibration's cost per image says whether the per-image
        work itself costs more inside the pipeline, or the work around it (reads, batches, hand-over)."""
        with self.decoding.get_lock():
            return {"decode_cpu_seconds": self.decoding[0], "decoded_images": self.decoding[1]}

    def __getitem__(self, index: int):
        return self._item(self.samples[index])

    def _records(self, indices: Sequence[int]) -> Iterable[tuple[bytes, int]]:
        from workloads.formats import read_ahead

        if self.read_threads == 0 or len(indices) < 2:
            return (self.samples[i] for i in indices)
        first = self.samples[indices[0]]  # opens the reader's per-process state before threads share it
        return itertools.chain([first], read_ahead(self.samples.__getitem__, indices[1:], self.read_threads))

    def _unless_stopped(self, records: Iterable[tuple[bytes, int]]) -> Iterator[tuple[bytes, int]]:
        for record in records:
            if self.stop.value:
                raise LoaderStopped("the loader is closing: batch dropped")
            yield record

    def __getitems__(self, indices: Sequence[int]) -> Any:
        records = self._unless_stopped(self._records(indices))
        if self._to_pixels is None:
            return [self._item(r) for r in records]
        return self._into_batch(records, len(indices))

    def _into_batch(self, records: Iterable[tuple[bytes, int]], n: int) -> "ImageBatch":
        import numpy as np
        import torch

        labels: list[int] = []  # one tensor at the end: a tensor's item assignment costs 10-60 us an image
        images = pixels_out = None
        slot = None
        decode_s = 0.0
        for i, (data, label) in enumerate(records):
            t0 = time.thread_time()
            pixels = np.asarray(self._to_pixels(decode_rgb(data)))
            decode_s += time.thread_time() - t0
            if images is None:
                shape = (n, *pixels.shape)
                images, slot = self.recycler.acquire(shape) if self.recycler else (_batch_tensor(shape), None)
                pixels_out = images.numpy()
            if pixels.shape != pixels_out.shape[1:]:
                raise ValueError(f"image {i} of a batch is {pixels.shape}, the first was {pixels_out.shape[1:]}: "
                                 "the transform must end at one size")
            pixels_out[i] = pixels
            labels.append(int(label))
        self._decoded(decode_s, n)
        batch = ImageBatch((images, torch.tensor(labels, dtype=torch.long)))
        if slot is not None:
            batch.recycled = (self.recycler.key, slot)
        return batch


class LoaderStopped(RuntimeError):
    """A loader worker's batch dropped because the loader is closing (`ImageSamples.stop`)."""


def _shared_flag() -> Any:
    import multiprocessing

    return multiprocessing.RawValue("b", 0)


def _shared_sums(n: int) -> Any:
    """`n` doubles behind a lock, made before the loader's workers fork so that they all add to them."""
    import multiprocessing

    return multiprocessing.Array("d", n)


def watch_decoding(meter: Meter, dataset: Any) -> None:
    """Have `meter` count the loader workers' decoding over its window (`ImageSamples.decode_counters`):
    the result then carries `decode_cpu_ms_per_image` (see `decode_cost`)."""
    if isinstance(dataset, ImageSamples) and dataset.transform is not None:
        meter.track(dataset.decode_counters, decode_cost)


def decode_cost(counters: dict[str, Any]) -> None:
    """`decode_cpu_ms_per_image`: the workers' CPU milliseconds per image in decode and augmentation
    over the window, from the counters' growth over it (`decode_cpu_seconds`, `decoded_images`)."""
    images = counters.get("decoded_images") or 0
    if images > 0:
        counters["decode_cpu_ms_per_image"] = 1000.0 * counters["decode_cpu_seconds"] / images


class ImageBatch(tuple):
    """(uint8 NHWC images, int64 labels) of a batch already assembled by `ImageSamples`;
    `recycled` = (recycler key, slot) when its images are a `BatchRecycler` buffer, which the
    training process frees again once it lets go of them (`_received_batch`, where it unpickles)."""

    recycled: tuple[int, int] | None = None

    def __reduce__(self):
        return _received_batch, (tuple(self), self.recycled)


# Recyclers of this process by key: a batch rebuilt in the training process finds its own.
_RECYCLERS: "weakref.WeakValueDictionary[int, BatchRecycler]" = weakref.WeakValueDictionary()


class BatchRecycler:
    """Shared-memory image buffers that each loader worker fills again once the training process
    has let go of them, instead of a fresh shared-memory block per batch (config `recycle_batches`).

    A fresh block costs its worker a page fault and the zeroing of every 4 KiB page as the images
    are written (THP is off for shared memory on the hosts measured): about 39 faults and 0.11 to
    0.13 ms of kernel time per 224x224 image on an H200 host, 4% of the decode's time. A worker owns
    up to `slots` buffers, made as it needs them (so it holds as many as it ever had out at once, as
    many as the stock loader has alive at its peak); a flag in memory shared with the training
    process (made before the workers fork) says a buffer is handed over. The training process clears it when the batch's image tensor
    is freed (after the pin-memory copy, or the copy to the device), and keeps the buffer mapped, so
    a buffer handed over again maps nothing new. When every slot is out (the training process holds
    more batches than the prefetch depth), the worker takes a fresh block, as the stock collate does:
    it never waits."""

    def __init__(self, workers: int, slots: int):
        import multiprocessing

        self.key = id(self)
        self.slots = max(1, int(slots))
        # 1 while the training process may still read the buffer; made here, in the training
        # process, so that the forked workers share it.
        self.handed_over = multiprocessing.RawArray("b", max(1, int(workers)) * self.slots)
        self._buffers: dict[int, Any] = {}  # a worker's own buffers, by slot
        self._mapped: dict[int, Any] = {}  # the training process's mappings, by flag index
        _RECYCLERS[self.key] = self

    def acquire(self, shape: tuple[int, ...]) -> tuple[Any, int | None]:
        """A uint8 tensor of `shape` to fill, and the flag index to hand over with it (None: a
        fresh block, or not in a loader worker)."""
        import torch

        info = torch.utils.data.get_worker_info()
        if info is None:
            return torch.empty(shape, dtype=torch.uint8), None
        first = info.id * self.slots
        for slot in range(self.slots):
            index = first + slot
            if index >= len(self.handed_over) or self.handed_over[index]:
                continue
            buffer = self._buffers.get(slot)
            if buffer is None or tuple(buffer.shape) != tuple(shape):
                buffer = self._buffers[slot] = _batch_tensor(shape)
            self.handed_over[index] = 1
            return buffer, index
        return _batch_tensor(shape), None

    def received(self, images: Any, index: int) -> None:
        """In the training process: hold the buffer's mapping and free its slot with the tensor."""
        self._mapped[index] = images.untyped_storage()
        weakref.finalize(images, self.release, index)

    def release(self, index: int) -> None:
        self.handed_over[index] = 0

    def is_recycled(self, images: Any) -> bool:
        """In the training process: whether `images` lies in a buffer this recycler keeps mapped
        (it stays at the same address for as long as the loader lives), not a fresh block."""
        ptr = images.untyped_storage().data_ptr()
        return any(storage.data_ptr() == ptr for storage in self._mapped.values())


def use_registered_buffers(cfg: dict[str, Any], cuda: bool, gpu_decode: bool, normalize: str) -> bool:
    """Whether a training point copies its batches to the GPU straight from the loader workers'
    recycled buffers (`RegisteredCopy`) instead of through the DataLoader's pin-memory thread. Config
    `register_buffers`: "auto" (the default) where the pipeline allows it (a CUDA device, CPU
    decoding, uint8 batches assembled and recycled), true (an error where it does not), false."""
    setting = cfg.get("register_buffers", "auto")
    applicable = bool(cuda and not gpu_decode and normalize == "device" and cfg.get("recycle_batches", True)
                      and cfg.get("assemble_batches", True))
    if setting in (None, "", "auto"):
        return applicable
    if setting not in (True, False, 0, 1):
        raise ValueError(f"register_buffers must be auto, true or false, not {setting!r}")
    if setting and not applicable:
        raise ValueError("register_buffers needs device=cuda, decode=cpu, normalize=device and recycled, "
                         "assembled batches (recycle_batches and assemble_batches on)")
    return bool(setting)


class RegisteredCopy:
    """A batch to the GPU straight from the loader worker's recycled shared-memory buffer (config
    `register_buffers`): each buffer registered with CUDA once (cudaHostRegister; the training
    process keeps it mapped at one address while the loader lives), so no pin-memory thread copies
    every batch into pinned memory first (38.5 MB per 256 images at 224 px, through caches the loader
    workers share). Fresh blocks (every recycled buffer out) are copied from pageable memory. The
    copy runs on a stream of its own and is waited for before the batch is let go, since the worker
    may fill the buffer again as soon as it is; the default stream then waits for that stream."""

    def __init__(self, recycler, device: str):
        import torch

        self.torch = torch
        self.cudart = torch.cuda.cudart()
        self.recycler = recycler
        self.device = device
        self.stream = torch.cuda.Stream()
        self.registered: set[int] = set()
        self.batches = self.pageable = 0

    def __call__(self, images):
        torch = self.torch
        storage = images.untyped_storage()
        ptr = storage.data_ptr()
        self.batches += 1
        if ptr not in self.registered:
            if self.recycler is not None and self.recycler.is_recycled(images):
                err = self.cudart.cudaHostRegister(ptr, storage.nbytes(), 0)
                if int(err) != 0:
                    raise RuntimeError(f"cudaHostRegister of a {storage.nbytes()}-byte batch buffer failed: {err}")
                self.registered.add(ptr)
            else:
                self.pageable += 1
        with torch.cuda.stream(self.stream):
            x = images.to(self.device, non_blocking=True)
        self.stream.synchronize()
        current = torch.cuda.current_stream()
        current.wait_stream(self.stream)
        x.record_stream(current)
        return x

    def close(self) -> None:
        self.torch.cuda.synchronize()
        for ptr in self.registered:
            self.cudart.cudaHostUnregister(ptr)
        self.registered.clear()


def _received_batch(items: tuple, recycled: tuple[int, int] | None):
    """Unpickled in the training process: the batch as a plain tuple, its buffer's slot freed with
    its image tensor."""
    if recycled is not None:
        recycler = _RECYCLERS.get(recycled[0])
        if recycler is not None:
            recycler.received(items[0], recycled[1])
    return tuple(items)


def _before_uint8(transform: Callable | None) -> Callable | None:
    """The steps of a Compose that ends in `ToHWCUint8`, without it (None for any other transform)."""
    steps = getattr(transform, "transforms", None)
    if not steps or not isinstance(steps[-1], ToHWCUint8):
        return None
    from torchvision import transforms as T

    return T.Compose(steps[:-1])


def _batch_tensor(shape: tuple[int, ...]):
    """An empty uint8 tensor; in a loader worker, in shared memory from the start, as default_collate
    allocates its output there, so handing it to the training process copies nothing more."""
    import torch

    if torch.utils.data.get_worker_info() is None:
        return torch.empty(shape, dtype=torch.uint8)
    elem = torch.empty(0, dtype=torch.uint8)
    storage = elem._typed_storage()._new_shared(math.prod(shape), device=elem.device)
    return elem.new(storage).resize_(*shape)


def collate_images(batch: Any):
    """The loaders' collate: an `ImageBatch` passes as it is, anything else through default_collate."""
    if isinstance(batch, ImageBatch):
        return tuple(batch) if batch.recycled is None else batch
    from torch.utils.data import default_collate

    return default_collate(batch)


def collate_raw(batch):
    """JPEG bytes of a batch packed into one uint8 tensor with their lengths, and the labels: one
    shared-memory block per batch to hand over from a worker, not one per image."""
    import torch

    lengths = [len(b[0]) for b in batch]
    return torch.cat([b[0] for b in batch]), lengths, torch.tensor([b[1] for b in batch], dtype=torch.long)


def split_raw(flat: Any, lengths: list[int]) -> list:
    """The per-image byte tensors of a `collate_raw` batch (views, no copies)."""
    return list(flat.split(lengths))


class EndlessPasses:
    """Sample indices, pass after pass over `n` samples (a new shuffle each pass when asked), never
    ending. The loader's workers then run on across pass boundaries instead of draining and
    re-priming at every epoch, a stall that a full-size dataset's long epochs make negligible but
    a scaled-down dataset's short ones would not (seen: 2.5 s at each 70-batch epoch of a GPU run)."""

    def __init__(self, n: int, shuffle: bool, seed: int):
        self.n = n
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        rng = random.Random(self.seed)
        order = list(range(self.n))
        while True:
            if self.shuffle:
                rng.shuffle(order)
            yield from order

    def __len__(self) -> int:
        return self.n * 1_000_000  # "endless" for the loader's length


def make_loader(
    dataset: Any,
    batch_size: int,
    workers: int,
    prefetch_factor: int,
    pin_memory: bool,
    shuffle: bool,
    seed: int,
    collate_fn: Callable | None = None,
    pin_workers: bool = False,
    recycle_batches: bool = False,
    in_order: bool = True,
):
    """A DataLoader over endless passes of the dataset (see EndlessPasses): persistent workers,
    `prefetch_factor` batches read ahead per worker, whole batches only. `recycle_batches`: an
    assembling `ImageSamples` fills `BatchRecycler` buffers, prefetch depth + 2 per worker (the
    batches in flight, the one being trained on and the one being pinned). `in_order=False`: batches
    are taken as workers finish them, not in the order they were asked for, so a finished batch never
    waits behind a slower worker's (on H200 hosts the workers then spent less CPU per image, with
    their vCPUs as busy as before: docs/PERFORMANCE.md; PyTorch 2.6 and later, ignored before)."""
    import torch

    if len(dataset) < batch_size:
        raise ValueError(f"the dataset has {len(dataset)} images, fewer than one batch of {batch_size}")
    if recycle_batches and workers > 0 and isinstance(dataset, ImageSamples) and dataset.assembles:
        dataset.recycler = BatchRecycler(workers, prefetch_factor + 2)
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=EndlessPasses(len(dataset), shuffle, seed),
        num_workers=workers,
        prefetch_factor=prefetch_factor if workers > 0 else None,
        persistent_workers=workers > 0,
        pin_memory=pin_memory,
        drop_last=True,
        collate_fn=collate_fn or collate_images,
        worker_init_fn=pin_worker if pin_workers else None,
        **({} if in_order or not _loader_takes_in_order() else {"in_order": False}),
    )


def _loader_takes_in_order() -> bool:
    import inspect

    import torch

    return "in_order" in inspect.signature(torch.utils.data.DataLoader.__init__).parameters


def pin_worker(worker_id: int) -> None:
    """A loader worker on one vCPU of the shape's own (config `pin_workers`), as each calibration
    process runs: it is never migrated between vCPUs; the training process still runs on any."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[worker_id % len(cpus)]})


@contextlib.contextmanager
def closing_loader(loader: Any):
    """Stop a DataLoader's persistent workers on the way out, so a worker process never outlives
    the point that started it (also when the point fails). Workers over `ImageSamples` drop the
    batch they are making first (its `stop` flag): nothing after the window needs it."""
    try:
        yield loader
    finally:
        stop = getattr(getattr(loader, "dataset", None), "stop", None)
        if stop is not None:
            stop.value = 1
        iterator = getattr(loader, "_iterator", None)
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


def loader_workers(cfg: dict[str, Any], vcpus: int) -> int:
    workers = cfg.get("workers")
    return max(1, int(vcpus)) if workers in (None, "") else max(0, int(workers))


def batch_samples(batch: Any) -> float:
    """Samples in a loader's batch: its labels, which come last ((images, labels), (data, lengths, labels))."""
    return float(len(batch[-1]))


def warmup_batches(cfg: dict[str, Any], workers: int) -> int:
    """Prefetch depth in batches plus a few steps: warm-up outlasts the prefetch queue (what the
    loader made before the window is then dropped: `drain_ready`)."""
    return max(1, workers) * int(cfg.get("prefetch_factor", 2)) + int(cfg.get("warmup_steps", 3))


def random_resized_crop_box(
    height: int, width: int, rng: random.Random, scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """(top, left, h, w) of a RandomResizedCrop, torchvision's algorithm with Python's RNG (drawing
    through torch costs tens of microseconds per image, which adds up on the GPU path)."""
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height  # fallback: the whole image, cropped to the ratio range, centred
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class GpuAugment:
    """nvjpeg decode of a batch of JPEG byte tensors, then RandomResizedCrop + flip + normalize on
    the GPU into one channels-last float batch.

    Crops differ in size, so each is resized on its own (a view, a float copy, one antialiased
    bilinear resize); flip and normalize then run once on the whole batch. The work runs on a side
    stream so decoding the next batch overlaps the training step queued on the main stream.
    """

    def __init__(self, size: int, device: str, seed: int = 0):
        import torch

        self.size = size
        self.device = device
        self.rng = random.Random(seed)
        self.stream = torch.cuda.Stream(device=device)
        self.mean, self.std = pixel_mean_std(device)
        torch.cuda.synchronize(device)  # the side stream uses mean and std made on the main one

    def __call__(self, flat: Any, lengths: list[int]) -> Any:
        import torch
        import torch.nn.functional as F
        from torchvision.io import ImageReadMode, decode_jpeg

        main = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self.stream):
            images = decode_jpeg(split_raw(flat, lengths), mode=ImageReadMode.RGB, device=self.device)
            n = len(images)
            out = torch.empty((n, 3, self.size, self.size), dtype=torch.float32, device=self.device)
            for i, img in enumerate(images):
                top, left, h, w = random_resized_crop_box(int(img.shape[-2]), int(img.shape[-1]), self.rng)
                crop = img[:, top : top + h, left : left + w].unsqueeze(0).float()
                out[i] = F.interpolate(crop, size=(self.size, self.size), mode="bilinear", antialias=True, align_corners=False)[0]
            flip = torch.rand(n, device=self.device) < 0.5
            out = torch.where(flip.view(n, 1, 1, 1), out.flip(-1), out)
            out = ((out - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        main.wait_stream(self.stream)
        out.record_stream(main)  # made on the side stream, used on the main one
        return out


# ---------------------------------------------------------------- timing
class StepClock:
    """Step times as intervals between completions of consecutive steps.

    On the CPU a step is complete when its Python call returns. On a GPU, `tick` records an event
    after the step is queued and waits for the previous step's event, so one step stays queued and
    the reported interval covers the GPU's work and any wait for input.
    """

    def __init__(self, device: str):
        self.cuda = is_cuda(device)
        self._pending: tuple[Any, float] | None = None
        self._last = 0.0

    def start(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self._last = time.perf_counter()

    def _lap(self) -> float:
        now = time.perf_counter()
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
    seconds on that backlog at its own pace: seen on an H200, 42 steps of 16-vCPU training at the
    GPU's 4,700 images/s before the loader's 3,335 showed, in a window that read 3,998 over both;
    near the GPU's speed the backlog outlasted whole windows. Taken without a step, the backlog is
    gone in milliseconds. The round of steps after it keeps out what the drain itself does to a
    loader faster than its consumer: its workers, idle behind a full queue, all start a batch at
    once and the consumer waits a whole batch's making for the first. A loader slower than its
    consumer has no backlog left after warm-up: its first fetch waits, and the drain ends there (it
    used to take that wait as the pace of a ready fetch and went on dropping batches at the
    loader's pace: on an H100, 20 batches in 10.9 s at 2 vCPUs, which left the window 6 steps).
    Returns the batch the last fetch waited for (the next step's) and the samples dropped (a pass
    over the data counts them).
    """
    for dt, k in clock.flush():  # the warm-up's last step, complete: the GPU is idle from here
        meter.step(dt, k)
    t_start = time.perf_counter()
    limit = 4 * meter.warmup_steps + 8  # far more than the prefetch queue holds (warm-up spans its depth)
    dropped, dropped_samples, quickest = 0, 0.0, math.inf
    while True:
        t0 = time.perf_counter()
        batch = next(batches)
        took = time.perf_counter() - t0
        waited = took > (max(DRAIN_WAIT_S, 4 * quickest) if dropped else DRAIN_FIRST_WAIT_S)
        if waited or dropped >= limit or time.perf_counter() - t_start > DRAIN_MAX_S:
            break
        quickest = min(quickest, took)
        dropped += 1
        dropped_samples += samples_of(batch)
        del batch  # its shared-memory buffer goes back to its worker
    clock.start()
    meter.drained(dropped, dropped_samples, time.perf_counter() - t_start)
    return batch, dropped_samples


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
    read_before = tree_counters()["read_bytes"]
    state = {"samples": 0.0, "passes": 0}

    def pass_done() -> None:
        state["passes"] += 1
        if state["passes"] == 1:
            extra["cold_read_bytes"] = tree_counters()["read_bytes"] - read_before
            extra["cold_samples"] = state["samples"]
            meter.mark_phase("warm")

    def passes_done() -> None:
        while pass_samples and state["samples"] >= pass_samples * (state["passes"] + 1):
            pass_done()

    steps = 0
    batches_this_run = 0
    clock.start()
    meter.mark_phase("cold")
    for _ in range(max_passes):
        batches_this_run = 0
        stopped = False
        iterator = iter(loader)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            n = step(batch)
            state["samples"] += n
            steps += 1
            batches_this_run += 1
            for dt, k in clock.tick(n):
                meter.step(dt, k)
            passes_done()
            if meter.done():
                stopped = True
                break
            if meter.needs_drain:
                try:
                    first, dropped = drain_ready(iterator, meter, clock, samples_of)  # type: ignore[arg-type]
                except StopIteration:
                    break
                iterator = itertools.chain([first], iterator)  # the batch the drain waited for comes next
                state["samples"] += dropped
                passes_done()
        if stopped or pass_samples or batches_this_run == 0:
            break
        pass_done()  # a finite loader ran out: one pass; go again
        batches_this_run = 0  # counted whole in `passes` now (matters when max_passes ends the loop)
    for dt, k in clock.flush():
        meter.step(dt, k)
    if pass_samples:
        extra["epochs"] = state["samples"] / pass_samples
    else:
        try:
            extra["epochs"] = state["passes"] + batches_this_run / len(loader)  # type: ignore[arg-type]
        except TypeError:
            pass  # endless, with no pass size: nothing to count
    return steps


def synthetic_images(batch_size: int, size: int, device: str, channels_last: bool) -> Any:
    """One random batch of normalized images on the device, in the model's memory format: the
    input of a point that measures the model alone (input: synthetic)."""
    import torch

    x = torch.randn(batch_size, 3, size, size, device=device)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


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
    """A meter for a timed loop. `loader_fed`: batches come from loader workers that read ahead, so
    the window opens once the loop has drained the batches they made before it (`drain_ready`;
    config `drain: false` turns that off)."""
    return Meter(
        round_steps=round_steps,
        warmup_steps=warmup,
        time_budget_s=spec.time_budget_s,
        min_steps=int(cfg.get("min_steps", 10)),
        min_seconds=cfg.get("min_seconds"),
        spread_target=spec.spread_target,
        gpu=is_cuda(device),
        drain=loader_fed and bool(cfg.get("drain", True)),
    )


def framework_versions() -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__}
    try:
        import torchvision

        out["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        import PIL

        out["pillow"] = PIL.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["gpu"] = torch.cuda.get_device_name(0)
    return out
