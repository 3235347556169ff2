"""Loader workers read a batch's files ahead of decoding it (image_loader.ImageSamples): the same
items in the same order as one read at a time, from every format, in forked DataLoader workers,
with the reads really in flight together."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from workloads import formats, gpu_augment, image_loader, image_transforms, synth  # noqa: E402  # noqa: E402


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imagenet")
    synth.generate_imagenet(out, 24, 3, seed=2, val_fraction=0.0, processes=1)
    folder = formats.ImageFolder(out / "train")
    records = [(folder.relpath(i), *folder[i]) for i in range(len(folder))]
    for fmt in ("lmdb", "rec", "tar"):
        formats.pack_records(records, formats.open_writer(fmt, out / "packed", "train"))
    return out


def _same(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(a, b))


@pytest.mark.parametrize("fmt", ["files", "lmdb", "rec", "tar"])
def test_batch_read_ahead_gives_the_items_one_read_gives(packed, fmt):
    samples = formats.open_image_dataset(packed, fmt, "train")
    indices = [5, 0, 17, 3, 3, 22, 9, 11]
    raw = image_loader.ImageSamples(samples, None, read_threads=3)  # bytes as stored: exact comparison
    assert _same(raw.__getitems__(indices), [raw[i] for i in indices])
    decoded = image_loader.ImageSamples(samples, image_transforms.eval_transform(32, 36), read_threads=3)
    images, labels = image_loader.collate_images(decoded.__getitems__(indices))
    assert _same(list(zip(images, labels.tolist())), [decoded[i] for i in indices])


def test_forked_loader_workers_read_ahead_the_batches_a_serial_loader_gives(packed):
    samples = formats.open_image_dataset(packed, "lmdb", "train")  # lmdb: one environment per process

    def first_batches(read_threads: int):
        loader = image_loader.make_loader(image_loader.ImageSamples(samples, None, read_threads), 4, 2, 2,
                                          pin_memory=False, shuffle=True, seed=7, collate_fn=gpu_augment.collate_raw)
        with image_loader.closing_loader(loader):
            it = iter(loader)
            return [next(it) for _ in range(8)]

    serial, ahead = first_batches(0), first_batches(4)
    for (flat_s, len_s, y_s), (flat_a, len_a, y_a) in zip(serial, ahead):
        assert torch.equal(flat_s, flat_a) and len_s == len_a and torch.equal(y_s, y_a)


class _CountingReads:
    """Records: b"x", the index as label; each read waits a little and counts the reads in flight."""

    def __init__(self, n: int):
        self.n = n
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.02)  # long enough for the other threads to start theirs
        with self.lock:
            self.now -= 1
        return b"x", i


@pytest.mark.parametrize("threads", [0, 1, 4])
def test_reads_are_in_flight_together_only_with_threads(threads):
    reads = _CountingReads(16)
    items = image_loader.ImageSamples(reads, None, read_threads=threads).__getitems__(list(range(12)))
    assert [label for _, label in items] == list(range(12))
    if threads <= 1:
        assert reads.most == 1
    else:  # never more than the pool's threads; more than one unless the host starved all but one
        assert 2 <= reads.most <= threads
