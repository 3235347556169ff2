"""The DataLoader of the image workloads: ImageNet-style (JPEG bytes, label) samples read from
files or packed shards, decoded and augmented in loader workers (`ImageSamples`), over endless
passes (`EndlessPasses`, `make_loader`), closed with the point (`closing_loader`).

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
- Loader workers run on any vCPU of the shape, as the scheduler places them (config `pin_workers`
  puts each on one of its own, as each calibration process runs). Pinned, they were preempted a
  third as often, but the pipeline's rate moved with the host, not the setting: +1% to +16% at 4
  to 12 vCPUs on one H200 host, -13% to +4% at 2 to 12 on another, so the default stays the stock
  DataLoader's.

torch is imported inside functions: importing this module does not need it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from workloads import distributed
from workloads.batch_buffers import BatchRecycler, ImageBatch, batch_tensor
from workloads.distributed import shard
from workloads.formats import readers
from workloads.image_transforms import decode_rgb, steps_before_uint8
from workloads.loop import StepClock, batch_samples, new_meter, run_epochs
from workloads.measure import Meter
from workloads.protocol import SYNTHETIC_INPUT, Result, Spec

IMAGE_INPUTS = ("files", "lmdb", "rec", "tar")
# What a PyTorch image workload's worker imports: the framework, its vision library, PIL, numpy.
TORCH_IMAGE_MODULES = ("torch", "torchvision", "PIL", "numpy")
INPUTS = IMAGE_INPUTS + (SYNTHETIC_INPUT,)
DECODERS = ("cpu", "gpu")


def open_images(data_dir: str, fmt: str, split: str) -> Sequence[tuple[bytes, int]]:
    """The (jpeg bytes, label) samples of a dataset split in one of the packed formats."""
    if not data_dir:
        raise ValueError("spec.data_dir is empty: point it at a dataset made by `sizer data imagenet`")
    samples = readers.open_image_dataset(data_dir, fmt, split=split)
    if len(samples) == 0:
        raise ValueError(f"no {split} images in {data_dir} (format {fmt})")
    return samples


def dataset_bytes(data_dir: str, fmt: str, split: str) -> int:
    return readers.dataset_bytes(data_dir, fmt, split)


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
        self._to_pixels = steps_before_uint8(transform) if assemble else None
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
        if self.read_threads == 0 or len(indices) < 2:
            return (self.samples[i] for i in indices)
        first = self.samples[indices[0]]  # opens the reader's per-process state before threads share it
        return itertools.chain([first], readers.read_ahead(self.samples.__getitem__, indices[1:], self.read_threads))

    def _unless_stopped(self, records: Iterable[tuple[bytes, int]]) -> Iterator[tuple[bytes, int]]:
        for record in records:
            if self.stop.value:
                raise LoaderStopped("the loader is closing: batch dropped")
            yield record

    def __getitems__(self, indices: Sequence[int]) -> Any:
        records = self._unless_stopped(self._records(indices))
        if self._to_pixels is None:
            return [self._item(r) for r in records]
        return self._into_batch(records, len(indices), self._to_pixels)

    def _batch_buffer(self, shape: tuple[int, ...]) -> tuple[Any, tuple[int, int] | None]:
        """A uint8 tensor to write a batch of `shape` into, and (recycler key, slot) when it is a
        recycled buffer (`ImageBatch.recycled`)."""
        if self.recycler is None:
            return batch_tensor(shape), None
        images, slot = self.recycler.acquire(shape)
        return images, None if slot is None else (self.recycler.key, slot)

    def _into_batch(self, records: Iterable[tuple[bytes, int]], n: int, to_pixels: Callable) -> ImageBatch:
        import numpy as np
        import torch

        labels: list[int] = []  # one tensor at the end: a tensor's item assignment costs 10-60 us an image
        images: Any = None
        pixels_out: Any = None
        recycled = None
        decode_s = 0.0
        for i, (data, label) in enumerate(records):
            t0 = time.thread_time()
            pixels = np.asarray(to_pixels(decode_rgb(data)))
            decode_s += time.thread_time() - t0
            if images is None:
                images, recycled = self._batch_buffer((n, *pixels.shape))
                pixels_out = images.numpy()
            if pixels.shape != pixels_out.shape[1:]:
                raise ValueError(f"image {i} of a batch is {pixels.shape}, the first was {pixels_out.shape[1:]}: "
                                 "the transform must end at one size")
            pixels_out[i] = pixels
            labels.append(int(label))
        self._decoded(decode_s, n)
        batch = ImageBatch((images, torch.tensor(labels, dtype=torch.long)))
        if recycled is not None:
            batch.recycled = recycled
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


def collate_images(batch: Any):
    """The loaders' collate: an `ImageBatch` passes as it is, anything else through default_collate."""
    if isinstance(batch, ImageBatch):
        return tuple(batch) if batch.recycled is None else batch
    from torch.utils.data import default_collate

    return default_collate(batch)


class EndlessPasses:
    """Sample indices, pass after pass over `n` samples (a new shuffle each pass when asked), never
    ending. The loader's workers then run on across pass boundaries instead of draining and
    re-priming at every epoch, a stall that a full-size dataset's long epochs make negligible but
    a scaled-down dataset's short ones would not (2.5 s at each 70-batch epoch of a GPU run).

    Rank `rank` of `world` (a multi-GPU point) takes its shard of each pass (`distributed.shard`):
    every rank shuffles with the same seed, so the shards of a pass never overlap."""

    def __init__(self, n: int, shuffle: bool, seed: int, rank: int = 0, world: int = 1):
        self.n = n
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world = world

    @property
    def pass_samples(self) -> int:
        """The samples of one pass of this rank: all of them, or its shard's."""
        return self.n // self.world

    def __iter__(self):
        rng = random.Random(self.seed)
        order = list(range(self.n))
        while True:
            if self.shuffle:
                rng.shuffle(order)
            yield from shard(order, self.rank, self.world)

    def __len__(self) -> int:
        return self.pass_samples * 1_000_000  # "endless" for the loader's length


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

    plan = distributed.current()
    sampler = EndlessPasses(len(dataset), shuffle, seed, *((plan.rank, plan.world) if plan else (0, 1)))
    if sampler.pass_samples < batch_size:
        share = f" ({sampler.pass_samples} for each of {sampler.world} GPUs)" if sampler.world > 1 else ""
        raise ValueError(f"the dataset has {len(dataset)} images{share}, fewer than one batch of {batch_size}")
    if recycle_batches and workers > 0 and isinstance(dataset, ImageSamples) and dataset.assembles:
        dataset.recycler = BatchRecycler(workers, prefetch_factor + 2)
    unordered: dict[str, Any] = {} if in_order or not _loader_takes_in_order() else {"in_order": False}
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        prefetch_factor=prefetch_factor if workers > 0 else None,
        persistent_workers=workers > 0,
        pin_memory=pin_memory,
        drop_last=True,
        collate_fn=collate_fn or collate_images,
        worker_init_fn=pin_worker if pin_workers else None,
        **unordered,
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


def warmup_batches(cfg: dict[str, Any], workers: int) -> int:
    """Prefetch depth in batches plus a few steps: warm-up outlasts the prefetch queue (what the
    loader made before the window is then dropped: `workloads.loop.drain_ready`)."""
    return max(1, workers) * int(cfg.get("prefetch_factor", 2)) + int(cfg.get("warmup_steps", 3))


@dataclass
class Feed:
    """Where a point's batches come from: the loader, its dataset (None for batches made on the
    device), the batches of its warm-up and its workers (a round of steps)."""

    loader: Any
    warmup: int
    dataset: ImageSamples | None = None
    workers: int = 1

    @property
    def loader_fed(self) -> bool:
        return self.dataset is not None


def image_feed(spec: Spec, cfg: dict[str, Any], source: str, transform: Callable | None, extra: dict[str, Any], *,
               pin_memory: bool, shuffle: bool, in_order: bool, collate_fn: Callable | None = None) -> Feed:
    """A loader over the split's images (config `split`, `batch_size`, `prefetch_factor`, `workers`,
    `read_threads`, `assemble_batches`, `pin_workers`, `recycle_batches`), its size in `extra`."""
    samples = open_images(spec.data_dir, source, cfg["split"])
    workers = loader_workers(cfg, spec.vcpus)
    dataset = ImageSamples(samples, transform, int(cfg.get("read_threads", 0)), bool(cfg.get("assemble_batches", True)))
    loader = make_loader(
        dataset,
        int(cfg["batch_size"]),
        workers,
        int(cfg["prefetch_factor"]),
        pin_memory=pin_memory,
        shuffle=shuffle,
        seed=spec.seed,
        collate_fn=collate_fn,
        pin_workers=bool(cfg.get("pin_workers", False)),
        recycle_batches=bool(cfg.get("recycle_batches", True)),
        in_order=in_order,
    )
    extra.update(
        loader_workers=workers,
        dataset_images=len(samples),
        dataset_gib=dataset_bytes(spec.data_dir, source, cfg["split"]) / 2**30,
    )
    return Feed(loader, warmup_batches(cfg, workers), dataset, workers)


def run_feed(spec: Spec, cfg: dict[str, Any], device: str, feed: Feed, batches: Iterator, step: Callable[[Any], float],
             result: Result) -> None:
    """The timed loop over a feed's batches (`batches`, its loader's iterator), the result's figures
    filled while the loader's workers live (their counters count); the loader closed after."""
    meter = new_meter(spec, cfg, feed.warmup, device, round_steps=feed.workers, loader_fed=feed.loader_fed)
    if feed.dataset is not None:
        watch_decoding(meter, feed.dataset)
    sampler = getattr(feed.loader, "sampler", None)
    pass_samples = None if feed.dataset is None else getattr(sampler, "pass_samples", len(feed.dataset))
    with closing_loader(feed.loader):
        run_epochs(meter, batches, step, StepClock(device), result.extra, pass_samples=pass_samples,
                   samples_of=batch_samples)
        meter.finish(result, spec.vcpus)
