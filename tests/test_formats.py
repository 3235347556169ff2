"""Packed formats: written as the frameworks' tools write them, read back by their own libraries."""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import os
import pickle
import re
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest
from PIL import Image

from workloads import formats, synth

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imagenet")
    synth.generate_imagenet(out, 40, 4, seed=1, val_fraction=0.0, processes=1)
    return out


def _records(folder: formats.ImageFolder):
    return [(folder.relpath(i), *folder[i]) for i in range(len(folder))]


@pytest.fixture(scope="module")
def packed(image_dir) -> Path:
    folder = formats.ImageFolder(image_dir / "train")
    for fmt in ("lmdb", "rec"):
        formats.pack_records(_records(folder), formats.open_writer(fmt, image_dir / "packed", "train"))
    formats.pack_records(_records(folder), formats.open_writer("tar", image_dir / "packed", "train", maxcount=15))
    return image_dir


# ---------------------------------------------------------------- protobuf Datum
def test_datum_round_trip_and_wire_bytes():
    raw = formats.encode_datum(b"\xff\xd8jpeg", 7, 3, 375, 500, True)
    # channels=3, height=375, width=500, data (len 6), label=7, encoded=1: protobuf's own bytes.
    assert raw == bytes([0x08, 3, 0x10, 0xF7, 0x02, 0x18, 0xF4, 0x03, 0x22, 6]) + b"\xff\xd8jpeg" + bytes([0x28, 7, 0x38, 1])
    datum = formats.decode_datum(raw)
    assert (datum["channels"], datum["height"], datum["width"], datum["label"], datum["encoded"]) == (3, 375, 500, 7, True)
    assert datum["data"] == b"\xff\xd8jpeg"
    assert formats.decode_datum(formats.encode_datum(b"", -1))["label"] == -1  # ten-byte negative varint


def test_datum_decoder_skips_fields_it_does_not_use():
    packed_floats = struct.pack("<2f", 1.5, -2.0)
    raw = bytes([0x32, len(packed_floats)]) + packed_floats + formats.encode_datum(b"x", 2)
    raw += bytes([0x79]) + b"\0" * 8  # field 15, fixed64: unknown to Datum
    datum = formats.decode_datum(raw)
    assert datum["float_data"] == [1.5, -2.0] and datum["label"] == 2 and datum["data"] == b"x"
    with pytest.raises(ValueError):
        formats.decode_datum(bytes([0x22, 10]) + b"short")


# ---------------------------------------------------------------- RecordIO framing
def test_recordio_frame_layout_and_magic_escaping(tmp_path):
    frame = formats.recordio_frame(b"hello")
    assert frame == struct.pack("<II", formats.RECORDIO_MAGIC, 5) + b"hello\0\0\0"
    magic = struct.pack("<I", formats.RECORDIO_MAGIC)
    payload = b"abcd" + magic + b"efgh" + magic + b"ij"
    frame = formats.recordio_frame(payload)
    # Aligned magic words are cut out: parts with continuation flags 1, 2 and 3.
    flags = [lrec >> 29 for lrec in struct.unpack_from("<I", frame, 4)] + [
        struct.unpack_from("<I", frame, 16)[0] >> 29,
        struct.unpack_from("<I", frame, 28)[0] >> 29,
    ]
    assert flags == [1, 2, 3]
    unaligned = b"ab" + magic + b"cd"
    assert formats.recordio_frame(unaligned).count(magic) == 2  # header + the unaligned copy, kept
    path = tmp_path / "x.rec"
    path.write_bytes(formats.recordio_frame(payload) + formats.recordio_frame(unaligned) + formats.recordio_frame(b""))
    fd = os.open(path, os.O_RDONLY)
    try:
        first, pos = formats.read_recordio_at(fd, 0)
        second, pos = formats.read_recordio_at(fd, pos)
        third, pos = formats.read_recordio_at(fd, pos)
        assert (first, second, third) == (payload, unaligned, b"")
        assert pos == path.stat().st_size
        with pytest.raises(ValueError, match="magic"):
            formats.read_recordio_at(fd, 4)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- each format against its library
def test_lmdb_is_convert_imageset_layout(packed):
    import lmdb

    folder = formats.ImageFolder(packed / "train")
    env = lmdb.open(str(packed / "packed" / "lmdb" / "train"), readonly=True, lock=False)
    with env.begin() as txn:
        items = [(bytes(k).decode(), bytes(v)) for k, v in txn.cursor()]
    env.close()
    assert len(items) == len(folder) == 40
    for n, (key, value) in enumerate(items):
        assert re.fullmatch(r"\d{8}_n\d{8}/n\d{8}_\d+\.JPEG", key), key
        assert int(key[:8]) == n
        datum = formats.decode_datum(value)
        rel = key[9:]
        assert datum["data"] == (packed / "train" / rel).read_bytes()
        assert datum["label"] == folder.classes.index(rel.split("/")[0])
        assert datum["encoded"] and datum["channels"] == 3
        with Image.open(io.BytesIO(datum["data"])) as img:
            assert (datum["width"], datum["height"]) == img.size


def test_tar_shards_are_webdataset_layout(packed):
    shards = sorted((packed / "packed" / "tar" / "train").glob("*.tar"))
    assert [p.name for p in shards] == ["train-000000.tar", "train-000001.tar", "train-000002.tar"]
    folder = formats.ImageFolder(packed / "train")
    expected = {Path(rel).with_suffix("").as_posix().replace("/", "_"): (data, label) for rel, data, label in _records(folder)}
    seen = {}
    for shard in shards:
        with tarfile.open(shard) as tar:
            names = tar.getnames()
            assert len(names) <= 30
            for jpg, cls in zip(names[::2], names[1::2]):  # a sample's files are adjacent
                key = jpg[: -len(".jpg")]
                assert jpg.endswith(".jpg") and cls == key + ".cls" and "." not in key
                seen[key] = (tar.extractfile(jpg).read(), int(tar.extractfile(cls).read().decode()))
    assert seen == expected


def test_readers_return_the_folder_records(packed):
    folder = formats.ImageFolder(packed / "train")
    want = sorted((data, label) for _, data, label in _records(folder))
    for fmt in ("files", "lmdb", "rec", "tar"):
        dataset = formats.open_image_dataset(packed, fmt, "train")
        assert len(dataset) == 40
        assert sorted(dataset[i] for i in range(len(dataset))) == want, fmt
        files = formats.dataset_files(packed, fmt, "train")
        assert files and all(p.is_file() for p in files)
        assert formats.dataset_bytes(packed, fmt, "train") == sum(p.stat().st_size for p in files)
    assert len(formats.dataset_files(packed, "files", "train")) == 40
    assert {p.suffix for p in formats.dataset_files(packed, "rec", "train")} == {".rec", ".idx"}


def _read_in_child(args):
    blob, indices = args
    reader = pickle.loads(blob)
    return [hashlib.sha1(reader[i][0]).hexdigest() + f":{reader[i][1]}" for i in indices]


def test_readers_work_in_forked_loader_workers(packed):
    """DataLoader workers get a pickled or forked copy of the dataset: each opens its own handles."""
    for fmt in ("lmdb", "rec", "tar"):
        reader = formats.open_image_dataset(packed, fmt, "train")
        here = _read_in_child((pickle.dumps(reader), range(0, 40, 3)))  # also opens handles here
        with multiprocessing.get_context("fork").Pool(2) as pool:
            there = pool.map(_read_in_child, [(pickle.dumps(reader), range(0, 40, 3))] * 2)
        assert there == [here, here], fmt


def test_unknown_format_and_missing_data_raise(tmp_path, packed):
    with pytest.raises(ValueError, match="unknown image format"):
        formats.open_image_dataset(packed, "zip")
    with pytest.raises(FileNotFoundError):
        formats.open_image_dataset(tmp_path, "rec")
    with pytest.raises(FileNotFoundError):
        formats.open_image_dataset(tmp_path, "lmdb")
    with pytest.raises(FileNotFoundError):
        formats.open_image_dataset(tmp_path, "tar")


@pytest.mark.mxnet
def test_recordio_reads_back_with_mxnet(packed):
    """The pure-Python .rec/.idx read by mxnet.recordio in the MXNet environment."""
    script = r"""
import hashlib, json, sys
import mxnet as mx
rec = mx.recordio.MXIndexedRecordIO(sys.argv[2], sys.argv[1], "r")
out = []
for key in rec.keys:
    header, data = mx.recordio.unpack(rec.read_idx(key))
    out.append([key, header.flag, float(header.label), header.id, header.id2, hashlib.sha1(data).hexdigest()])
print(json.dumps(out))
"""
    rec_path = packed / "packed" / "rec" / "train.rec"
    idx_path = packed / "packed" / "rec" / "train.idx"
    proc = subprocess.run(
        [str(MXNET_PYTHON), "-c", script, str(rec_path), str(idx_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = formats.RecordIOReader(rec_path, idx_path)
    assert len(rows) == len(ours) == 40
    for i, (key, flag, label, rid, rid2, digest) in enumerate(rows):
        data, our_label = ours[i]
        assert (key, flag, rid, rid2) == (ours.ids[i], 0, ours.ids[i], 0)
        assert int(label) == our_label and digest == hashlib.sha1(data).hexdigest()


@pytest.mark.parametrize("size", [0, 1, 4095, 110_000, 300_000])
def test_read_file_gives_the_whole_file(tmp_path, size):
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    assert formats.read_file(str(path)) == data


def test_image_folder_reads_the_files_bytes(image_dir):
    folder = formats.open_image_dataset(image_dir, "files", split="train")
    for i in range(len(folder)):
        data, label = folder[i]
        assert data == folder.files()[i].read_bytes()
        assert label == folder.samples[i][1]
