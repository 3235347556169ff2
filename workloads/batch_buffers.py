"""How a loader worker's image batch reaches the training process and the GPU: assembled in shared
memory (`ImageBatch`), in buffers each worker fills again (`BatchRecycler`), and copied to the GPU
straight from them (`RegisteredCopy`).

Training on a GPU with CPU decoding copies each batch to the device straight from the loader
worker's recycled shared-memory buffer, registered with CUDA once, instead of through the
DataLoader's pin-memory thread, and takes batches as the workers finish them (`in_order=False`,
`workloads.image_loader.make_loader`). Together, at 8 vCPUs on two H200 hosts, the pipeline went
from 0.88 and 0.77-0.82 of calibration x vCPUs to 0.94 and 0.91-0.99 (docs/PERFORMANCE.md,
"Pipeline fidelity").

torch is imported inside functions: importing this module does not need it.
"""

from __future__ import annotations

import math
import weakref
from typing import Any


class ImageBatch(tuple):
    """(uint8 NHWC images, int64 labels) of a batch already assembled by `ImageSamples`;
    `recycled` = (recycler key, slot) when its images are a `BatchRecycler` buffer, which the
    training process frees again once it lets go of them (`_received_batch`, where it unpickles)."""

    recycled: tuple[int, int] | None = None

    def __reduce__(self):
        return _received_batch, (tuple(self), self.recycled)


# Recyclers of this process by key: a batch rebuilt in the training process finds its own.
_RECYCLERS: "weakref.WeakValueDictionary[int, BatchRecycler]" = weakref.WeakValueDictionary()


def _received_batch(items: tuple, recycled: tuple[int, int] | None):
    """Unpickled in the training process: the batch as a plain tuple, its buffer's slot freed with
    its image tensor."""
    if recycled is not None:
        recycler = _RECYCLERS.get(recycled[0])
        if recycler is not None:
            recycler.received(items[0], recycled[1])
    return tuple(items)


def batch_tensor(shape: tuple[int, ...]):
    """An empty uint8 tensor; in a loader worker, in shared memory from the start, as default_collate
    allocates its output there, so handing it to the training process copies nothing more."""
    import torch

    if torch.utils.data.get_worker_info() is None:
        return torch.empty(shape, dtype=torch.uint8)
    elem = torch.empty(0, dtype=torch.uint8)
    storage = elem._typed_storage()._new_shared(math.prod(shape), device=elem.device)
    return elem.new(storage).resize_(*shape)


class BatchRecycler:
    """Shared-memory image buffers that each loader worker fills again once the training process
    has let go of them, instead of a fresh shared-memory block per batch (config `recycle_batches`).

    A fresh block costs its worker a page fault and the zeroing of every 4 KiB page as the images
    are written (where THP is off for shared memory): about 39 faults and 0.11 to 0.13 ms of kernel
    time per 224x224 image on an H200 host, 4% of the decode's time. A worker owns up to `slots`
    buffers, made as it needs them (so it holds as many as it ever had out at once, as many as the
    stock loader has alive at its peak); a flag in memory shared with the training process (made
    before the workers fork) says a buffer is handed over. The training process clears it when the
    batch's image tensor is freed (after the pin-memory copy, or the copy to the device), and keeps
    the buffer mapped, so a buffer handed over again maps nothing new. When every slot is out (the
    training process holds more batches than the prefetch depth), the worker takes a fresh block,
    as the stock collate does: it never waits."""

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
                buffer = self._buffers[slot] = batch_tensor(shape)
            self.handed_over[index] = 1
            return buffer, index
        return batch_tensor(shape), None

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
    copy runs on a stream of its own and is waited for before the batch is let go, because the worker
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

    def _register_once(self, images) -> None:
        storage = images.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self.registered:
            return
        if self.recycler is None or not self.recycler.is_recycled(images):
            self.pageable += 1
            return
        err = self.cudart.cudaHostRegister(ptr, storage.nbytes(), 0)
        if int(err) != 0:
            raise RuntimeError(f"cudaHostRegister of a {storage.nbytes()}-byte batch buffer failed: {err}")
        self.registered.add(ptr)

    def __call__(self, images):
        torch = self.torch
        self.batches += 1
        self._register_once(images)
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
