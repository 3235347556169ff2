"""A loader worker writes a batch's images straight into one uint8 tensor in shared memory
(image_loader.ImageSamples -> ImageBatch -> collate_images): the same pixels and labels as a
tensor per image stacked by default_collate, in-process and from forked DataLoader workers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from workloads import batch_buffers, formats, image_loader, image_transforms, synth  # noqa: E402  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imagenet")
    synth.generate_imagenet(out, 24, 3, seed=5, val_fraction=0.0, processes=1)
    return out


def _stacked(dataset: image_loader.ImageSamples, indices: list[int]):
    from torch.utils.data import default_collate

    return default_collate([dataset[i] for i in indices])


@pytest.mark.parametrize("read_threads", [0, 3])
def test_an_assembled_batch_is_the_stack_of_its_images(folder, read_threads):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads)
    indices = [4, 1, 19, 1, 7]
    batch = dataset.__getitems__(indices)
    assert isinstance(batch, batch_buffers.ImageBatch)
    images, labels = image_loader.collate_images(batch)
    want_images, want_labels = _stacked(dataset, indices)
    assert images.dtype == torch.uint8 and images.shape == (5, 32, 32, 3)
    assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
    assert not images.is_shared()  # in the training process itself: plain memory


def test_forked_workers_hand_over_batches_in_shared_memory_with_the_same_pixels(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=6, num_workers=2, shuffle=False,
                                         collate_fn=image_loader.collate_images, persistent_workers=False)
    batches = list(loader)
    assert len(batches) == 4
    for k, (images, labels) in enumerate(batches):
        want_images, want_labels = _stacked(dataset, list(range(6 * k, 6 * k + 6)))
        assert images.is_shared()  # came through shared memory from a worker
        assert torch.equal(images, want_images) and torch.equal(labels, want_labels)


def test_a_transform_of_another_kind_is_collated_as_before(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36, normalize="worker"), read_threads=0)
    batch = dataset.__getitems__([0, 1])
    assert isinstance(batch, list)  # float CHW per image, default_collate's job
    images, labels = image_loader.collate_images(batch)
    assert images.dtype == torch.float32 and images.shape == (2, 3, 32, 32)


def test_images_of_different_sizes_in_one_batch_are_a_clear_error():
    from PIL import Image
    from torchvision.transforms import Compose

    def jpeg(w: int, h: int) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", (w, h), (200, 10, 10)).save(buf, format="JPEG")
        return buf.getvalue()

    dataset = image_loader.ImageSamples([(jpeg(40, 30), 0), (jpeg(30, 40), 1)], Compose([image_transforms.ToHWCUint8()]))
    with pytest.raises(ValueError, match="must end at one size"):
        dataset.__getitems__([0, 1])


class _Affinity:
    """Items: the CPUs the process that fetched them may run on."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        import os

        return torch.tensor(sorted(os.sched_getaffinity(0)))


def test_pinned_loader_workers_each_run_on_one_cpu_of_the_shape():
    import os

    cpus = sorted(os.sched_getaffinity(0))
    seen = {}
    for pin in (False, True):
        loader = image_loader.make_loader(_Affinity(), 1, 2, 2, pin_memory=False, shuffle=False, seed=0, pin_workers=pin)
        with image_loader.closing_loader(loader):
            it = iter(loader)
            seen[pin] = [next(it)[0].tolist() for _ in range(4)]
    assert all(batch == cpus for batch in seen[False])
    assert all(len(batch) == 1 and batch[0] in cpus for batch in seen[True])
    if len(cpus) > 1:  # workers 0 and 1 alternate batches: each on its own CPU
        assert seen[True][0] != seen[True][1]


def _expected(dataset: image_loader.ImageSamples, batch_size: int, k: int):
    """Batch k of a loader over endless unshuffled passes of the dataset."""
    n = len(dataset)
    return _stacked(dataset, [(batch_size * k + i) % n for i in range(batch_size)])


def test_recycled_buffers_are_filled_again_only_after_the_training_process_let_go(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=0)
    loader = image_loader.make_loader(dataset, 6, 2, 2, pin_memory=False, shuffle=False, seed=0, recycle_batches=True)
    recycler = dataset.recycler
    assert recycler is not None and recycler.slots == 4
    buffers = set()
    with image_loader.closing_loader(loader):
        it = iter(loader)
        for k in range(20):  # each batch dropped before the next: its buffer comes back
            images, labels = next(it)
            want_images, want_labels = _expected(dataset, 6, k)
            assert images.is_shared()
            assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
            buffers.add(images.untyped_storage().data_ptr())
            del images, labels
    # 20 batches through at most 2 workers x 4 buffers, each mapped once by the training process
    assert len(buffers) <= 8
    assert 0 < len(recycler._mapped) <= 8


def test_batches_the_training_process_still_holds_are_never_overwritten(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=0)
    loader = image_loader.make_loader(dataset, 6, 2, 2, pin_memory=False, shuffle=False, seed=0, recycle_batches=True)
    with image_loader.closing_loader(loader):
        it = iter(loader)
        held = [next(it) for _ in range(16)]  # twice the buffers there are: workers take fresh blocks
    for k, (images, labels) in enumerate(held):
        want_images, want_labels = _expected(dataset, 6, k)
        assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
    assert len({images.untyped_storage().data_ptr() for images, _ in held}) == 16


def test_a_recycler_tells_its_buffers_from_fresh_blocks(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=0)
    loader = image_loader.make_loader(dataset, 6, 2, 2, pin_memory=False, shuffle=False, seed=0, recycle_batches=True)
    with image_loader.closing_loader(loader):
        it = iter(loader)
        held = [next(it)[0] for _ in range(16)]  # twice the buffers: the rest are fresh blocks
        recycled = [dataset.recycler.is_recycled(images) for images in held]
    assert 0 < sum(recycled) <= 8 and sum(recycled) < len(held)
    assert not dataset.recycler.is_recycled(torch.empty(6, 32, 32, 3, dtype=torch.uint8))


def _children_total(counter: str) -> float:
    """`counter` of the meter's process-tree counters, summed over this process's children (the loader workers)."""
    import os

    from workloads.measure import children_map, tree_counters

    return sum(tree_counters(child)[counter] for child in children_map().get(os.getpid(), []))


def test_recycling_cuts_the_workers_page_faults(folder):
    """The point of recycling: a fresh shared-memory block faults in (and zeroes) every page."""
    samples = formats.open_image_dataset(folder, "files", "train")
    faults = {}
    for recycle in (False, True):
        dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(128, 144), read_threads=0)
        loader = image_loader.make_loader(dataset, 8, 1, 2, pin_memory=False, shuffle=False, seed=0, recycle_batches=recycle)
        with image_loader.closing_loader(loader):
            it = iter(loader)
            for _ in range(6):
                next(it)
            before = _children_total("minor_faults")
            for _ in range(12):
                next(it)
            faults[recycle] = _children_total("minor_faults") - before
    # 12 batches of 8 x 128 x 128 x 3 bytes: 96 pages each when every batch is a fresh block
    assert faults[False] >= 12 * 96 * 0.8
    assert faults[True] < faults[False] / 4


@pytest.mark.parametrize("assemble", [True, False])
def test_a_closing_loader_drops_the_batch_a_worker_is_making(folder, assemble, monkeypatch):
    """Once the stop flag is up, the batch being made is dropped at its next image, not finished."""
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=2, assemble=assemble)
    decoded = []
    real_decode = image_loader.decode_rgb

    def decode_then_close(data):
        decoded.append(1)
        if len(decoded) == 3:
            dataset.stop.value = 1  # as closing_loader does, from the training process
        return real_decode(data)

    monkeypatch.setattr(image_loader, "decode_rgb", decode_then_close)
    with pytest.raises(image_loader.LoaderStopped):
        dataset.__getitems__(list(range(12)))
    assert len(decoded) == 3  # the other 9 images of the batch were never decoded


def test_closing_a_loader_sets_the_flag_its_forked_workers_see_and_stops_them(folder):
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=0)
    loader = image_loader.make_loader(dataset, 4, workers=2, prefetch_factor=2, pin_memory=False, shuffle=False, seed=0)
    with image_loader.closing_loader(loader):
        batches = iter(loader)
        images, _ = next(batches)
        assert images.shape == (4, 32, 32, 3) and not dataset.stop.value
        workers = list(loader._iterator._workers)
        assert all(w.is_alive() for w in workers)
    assert dataset.stop.value == 1
    assert not any(w.is_alive() for w in workers)


@pytest.mark.parametrize("assemble", [True, False])
def test_forked_workers_add_their_decoding_to_the_training_processs_counters(folder, assemble):
    """Each worker times its decode and augmentation per image into counters made before it forked:
    the training process reads every worker's images, and CPU seconds that are part of the workers'."""
    samples = formats.open_image_dataset(folder, "files", "train")
    dataset = image_loader.ImageSamples(samples, image_transforms.train_transform(96), read_threads=2, assemble=assemble)
    assert dataset.decode_counters() == {"decode_cpu_seconds": 0.0, "decoded_images": 0.0}
    loader = image_loader.make_loader(dataset, 4, workers=2, prefetch_factor=2, pin_memory=False, shuffle=True, seed=0)
    with image_loader.closing_loader(loader):
        batches = iter(loader)
        for _ in range(10):
            next(batches)
        counted = dataset.decode_counters()
        workers_cpu = _children_total("cpu_seconds")
    # 10 batches of 4 taken; at most 2 workers x 2 batches more asked for, made or in the making
    assert 40 <= counted["decoded_images"] <= 40 + 2 * 2 * 4
    assert 0 < counted["decode_cpu_seconds"] <= workers_cpu


def test_an_unordered_loader_takes_a_fast_workers_batches_before_a_slow_ones(folder):
    """`in_order=False`: a batch is taken as soon as any worker has one, so a worker held up does not
    stall the others' finished batches (in order, worker 0's batch would come first)."""
    import inspect
    import os
    import time

    if "in_order" not in inspect.signature(torch.utils.data.DataLoader.__init__).parameters:
        pytest.skip("this PyTorch's DataLoader has no in_order")

    class SlowFirstWorker(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            info = torch.utils.data.get_worker_info()
            if info is not None and info.id == 0:
                time.sleep(0.5)
            return torch.tensor([i, info.id if info is not None else -1, os.getpid()])

    for in_order, first_worker in ((True, 0), (False, 1)):
        loader = image_loader.make_loader(SlowFirstWorker(), 1, workers=2, prefetch_factor=2, pin_memory=False,
                                          shuffle=False, seed=0, collate_fn=torch.utils.data.default_collate,
                                          in_order=in_order)
        with image_loader.closing_loader(loader):
            first = next(iter(loader))
        assert int(first[0, 1]) == first_worker, (in_order, first)


def test_registered_buffers_are_used_where_the_pipeline_allows_them_unless_turned_off():
    gpu = {"recycle_batches": True, "assemble_batches": True}
    assert batch_buffers.use_registered_buffers({**gpu, "register_buffers": "auto"}, True, False, "device")
    assert batch_buffers.use_registered_buffers(gpu, True, False, "device")  # auto when unset
    # Where the pipeline does not allow it, auto quietly keeps the pin-memory thread ...
    assert not batch_buffers.use_registered_buffers(gpu, False, False, "device")  # no CUDA device
    assert not batch_buffers.use_registered_buffers(gpu, True, True, "device")  # nvjpeg decoding
    assert not batch_buffers.use_registered_buffers(gpu, True, False, "worker")  # float batches
    assert not batch_buffers.use_registered_buffers({**gpu, "recycle_batches": False}, True, False, "device")
    # ... and asked for outright it is an error; turned off it is off.
    with pytest.raises(ValueError, match="register_buffers needs device=cuda"):
        batch_buffers.use_registered_buffers({**gpu, "register_buffers": True}, False, False, "device")
    assert not batch_buffers.use_registered_buffers({**gpu, "register_buffers": False}, True, False, "device")
    with pytest.raises(ValueError, match="auto, true or false"):
        batch_buffers.use_registered_buffers({**gpu, "register_buffers": "sometimes"}, True, False, "device")
