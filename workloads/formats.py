"""Packed image formats, each record a (JPEG bytes, int label) pair, written the way the frameworks'
own tools write them, and read back with random access.

- `files`: an ImageNet-style folder, `<split>/<class>/<image>`; labels are the sorted class folders.
- `lmdb`: what NVCaffe's `convert_imageset --encoded` writes: keys `%08d_<relative path>`, values
  serialized caffe `Datum` messages (channels, height, width, data = the encoded JPEG, label,
  encoded = true), encoded here with a small protobuf varint codec.
- `rec`: what MXNet's `im2rec` writes: a RecordIO `.rec` (dmlc magic 0xced7230a, a length and
  continuation-flag word, 4-byte padding) whose payload is an IRHeader (`IfQQ`: flag, label, id,
  id2) and the JPEG, an `.idx` of `id<TAB>offset` lines and the `.lst` it came from.
- `tar`: WebDataset shards `<split>-000000.tar`, ... with `<key>.jpg` and `<key>.cls` per sample.

Packed datasets live under `<root>/<fmt>/...` (`root` is `<data_dir>/packed` for a generated
dataset): `lmdb/<split>/`, `rec/<split>.{rec,idx,lst}`, `tar/<split>/<split>-NNNNNN.tar`.

Readers open their files lazily in each process (DataLoader workers are forked) and read with
pread, so one reader object serves many workers. Standard library only, plus lmdb (imported when
used) and PIL (only to read a JPEG's dimensions when writing LMDB).
"""

from __future__ import annotations

import io
import os
import struct
import tarfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from pathlib import Path

FORMATS = ("files", "lmdb", "rec", "tar")
IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")

Record = tuple[bytes, int]


# ---------------------------------------------------------------- protobuf (caffe Datum)
def _varint(value: int) -> bytes:
    if value < 0:  # int32/int64 negatives are ten-byte two's complement on the wire
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _signed32(value: int) -> int:
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    return value


# Datum field numbers from caffe.proto.
_DATUM_CHANNELS, _DATUM_HEIGHT, _DATUM_WIDTH, _DATUM_DATA, _DATUM_LABEL, _DATUM_FLOAT, _DATUM_ENCODED = 1, 2, 3, 4, 5, 6, 7


def encode_datum(data: bytes, label: int, channels: int = 3, height: int = 0, width: int = 0, encoded: bool = True) -> bytes:
    """A serialized caffe Datum, fields in number order as protobuf writes them."""
    out = bytearray()
    for number, value in ((_DATUM_CHANNELS, channels), (_DATUM_HEIGHT, height), (_DATUM_WIDTH, width)):
        out += _varint(number << 3) + _varint(int(value))
    out += _varint(_DATUM_DATA << 3 | 2) + _varint(len(data)) + data
    out += _varint(_DATUM_LABEL << 3) + _varint(int(label))
    out += _varint(_DATUM_ENCODED << 3) + _varint(1 if encoded else 0)
    return bytes(out)


def decode_datum(buf: bytes) -> dict:
    """Parse a serialized caffe Datum; unknown fields are skipped as protobuf requires."""
    datum = {"channels": 0, "height": 0, "width": 0, "data": b"", "label": 0, "float_data": [], "encoded": False}
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            if number == _DATUM_CHANNELS:
                datum["channels"] = _signed32(value)
            elif number == _DATUM_HEIGHT:
                datum["height"] = _signed32(value)
            elif number == _DATUM_WIDTH:
                datum["width"] = _signed32(value)
            elif number == _DATUM_LABEL:
                datum["label"] = _signed32(value)
            elif number == _DATUM_ENCODED:
                datum["encoded"] = bool(value)
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated length-delimited field")
            chunk = buf[pos : pos + length]
            pos += length
            if number == _DATUM_DATA:
                datum["data"] = bytes(chunk)
            elif number == _DATUM_FLOAT:  # packed repeated float
                datum["float_data"] += list(struct.unpack(f"<{length // 4}f", chunk))
        elif wire == 5:
            if number == _DATUM_FLOAT:
                datum["float_data"].append(struct.unpack_from("<f", buf, pos)[0])
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return datum


def _jpeg_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:  # reads the header only
        return img.size


# ---------------------------------------------------------------- RecordIO (dmlc / MXNet)
RECORDIO_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", RECORDIO_MAGIC)
_IRHEADER = struct.Struct("<IfQQ")  # flag, label, id, id2


def pack_irheader(data: bytes, label: float, record_id: int, record_id2: int = 0) -> bytes:
    """mxnet.recordio.pack: IRHeader then the payload (flag 0: one scalar label)."""
    return _IRHEADER.pack(0, float(label), int(record_id), int(record_id2)) + data


def unpack_irheader(payload: bytes) -> tuple[dict, bytes]:
    flag, label, rid, rid2 = _IRHEADER.unpack_from(payload, 0)
    body = payload[_IRHEADER.size :]
    if flag > 0:  # a vector label of `flag` floats precedes the data
        labels = list(struct.unpack_from(f"<{flag}f", body, 0))
        return {"flag": flag, "label": labels, "id": rid, "id2": rid2}, body[4 * flag :]
    return {"flag": flag, "label": label, "id": rid, "id2": rid2}, body


def recordio_frame(payload: bytes) -> bytes:
    """One record as dmlc::RecordIOWriter frames it. The magic word must never appear 4-byte aligned
    inside a record, so the payload is split there into parts (continuation flags 1, 2, 3) and the
    reader puts the magic back between them."""
    out = bytearray()
    length = len(payload)
    aligned_end = length - length % 4
    start = 0
    hit = payload.find(_MAGIC_BYTES)
    while 0 <= hit and hit + 4 <= aligned_end:
        if hit % 4 == 0:
            flag = 1 if start == 0 else 2
            out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (hit - start)) + payload[start:hit]
            start = hit + 4
        hit = payload.find(_MAGIC_BYTES, hit + 1)
    flag = 3 if start else 0
    out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (length - start)) + payload[start:]
    out += b"\0" * ((-length) % 4)
    return bytes(out)


def read_recordio_at(fd: int, offset: int) -> tuple[bytes, int]:
    """(payload, offset of the next record) of the record starting at `offset` of an open .rec."""
    parts: list[bytes] = []
    pos = offset
    while True:
        head = os.pread(fd, 8, pos)
        if len(head) < 8:
            raise ValueError(f"truncated RecordIO header at offset {pos}")
        magic, lrec = struct.unpack("<II", head)
        if magic != RECORDIO_MAGIC:
            raise ValueError(f"bad RecordIO magic {magic:#x} at offset {pos}")
        flag, length = lrec >> 29, lrec & ((1 << 29) - 1)
        data = os.pread(fd, length, pos + 8)
        if len(data) < length:
            raise ValueError(f"truncated RecordIO record at offset {pos}")
        pos += 8 + length + ((-length) % 4)
        if flag == 0:
            return data, pos
        parts.append(data)
        if flag == 3:
            return _MAGIC_BYTES.join(parts), pos


# ---------------------------------------------------------------- writers
class _Writer(ABC):
    """Context-managed writer of (key, JPEG bytes, label) records."""

    def __init__(self, fsync: bool = False):
        self.fsync = fsync
        self.count = 0

    @abstractmethod
    def write(self, key: str, data: bytes, label: int) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def outputs(self) -> list[Path]:
        """The paths this writer produced (files or directories)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LmdbWriter(_Writer):
    """An LMDB environment (directory with data.mdb) as convert_imageset writes it."""

    COMMIT_EVERY = 1000  # convert_imageset commits every 1000 records

    def __init__(self, path: str | os.PathLike, fsync: bool = False, map_size: int = 1 << 40):
        super().__init__(fsync)
        import lmdb

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        close_lmdb_envs(self.path)  # a cached reader of this path would block opening it here
        # sync=False while writing; the environment is flushed once at close (when asked) instead.
        self._env = lmdb.open(str(self.path), map_size=map_size, subdir=True, sync=False, metasync=False)
        self._txn = self._env.begin(write=True)

    def write(self, key: str, data: bytes, label: int) -> None:
        width, height = _jpeg_size(data)
        lmdb_key = f"{self.count:08d}_{key}".encode()
        self._txn.put(lmdb_key, encode_datum(data, label, 3, height, width, True))
        self.count += 1
        if self.count % self.COMMIT_EVERY == 0:
            self._txn.commit()
            self._txn = self._env.begin(write=True)

    def close(self) -> None:
        if self._env is None:
            return
        self._txn.commit()
        if self.fsync:
            self._env.sync(True)
        self._env.close()
        self._env = None

    def outputs(self) -> list[Path]:
        return [self.path]


class RecordIOWriter(_Writer):
    """`<prefix>.rec`, `<prefix>.idx` and `<prefix>.lst` as im2rec writes them (pure Python)."""

    def __init__(self, prefix: str | os.PathLike, fsync: bool = False):
        super().__init__(fsync)
        self.prefix = Path(prefix)
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.rec_path = self.prefix.with_name(self.prefix.name + ".rec")
        self.idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        self.lst_path = self.prefix.with_name(self.prefix.name + ".lst")
        self._rec = open(self.rec_path, "wb")
        self._idx = open(self.idx_path, "w")
        self._lst = open(self.lst_path, "w")

    def write(self, key: str, data: bytes, label: int, record_id: int | None = None) -> None:
        rid = self.count if record_id is None else int(record_id)
        pos = self._rec.tell()
        self._rec.write(recordio_frame(pack_irheader(data, label, rid)))
        self._idx.write(f"{rid}\t{pos}\n")
        self._lst.write(f"{rid}\t{float(label):f}\t{key}\n")
        self.count += 1

    def close(self) -> None:
        if self._rec is None:
            return
        for fh in (self._rec, self._idx, self._lst):
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
            fh.close()
        self._rec = None

    def outputs(self) -> list[Path]:
        return [self.rec_path, self.idx_path, self.lst_path]


class TarShardWriter(_Writer):
    """WebDataset shards `<dir>/<prefix>-000000.tar`, ... of at most `maxcount` samples each."""

    def __init__(self, directory: str | os.PathLike, prefix: str = "train", maxcount: int = 1000, fsync: bool = False):
        super().__init__(fsync)
        if maxcount < 1:
            raise ValueError("maxcount must be >= 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.maxcount = maxcount
        self.shards: list[Path] = []
        self._tar: tarfile.TarFile | None = None

    def _next_shard(self) -> None:
        self._close_shard()
        path = self.directory / f"{self.prefix}-{len(self.shards):06d}.tar"
        self.shards.append(path)
        self._tar = tarfile.open(path, "w", format=tarfile.USTAR_FORMAT)

    def _close_shard(self) -> None:
        if self._tar is not None:
            self._tar.close()
            if self.fsync:
                _fsync_path(self.shards[-1])
            self._tar = None

    def _add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        info.mtime = 0  # reproducible shards
        self._tar.addfile(info, io.BytesIO(data))

    def write(self, key: str, data: bytes, label: int) -> None:
        if self._tar is None or self.count % self.maxcount == 0:
            self._next_shard()
        # WebDataset splits a member name at its first dot into key and extension.
        sample_key = key.rsplit(".", 1)[0].replace(".", "_").replace("/", "_")
        self._add(f"{sample_key}.jpg", data)
        self._add(f"{sample_key}.cls", str(int(label)).encode())
        self.count += 1

    def close(self) -> None:
        self._close_shard()
        if self.fsync:
            _fsync_path(self.directory)

    def outputs(self) -> list[Path]:
        return [self.directory]


def packed_paths(root: str | os.PathLike, fmt: str, split: str = "train") -> list[Path]:
    """Where a packed split lives under `root` (the format's directory or files)."""
    root = Path(root)
    if fmt == "lmdb":
        return [root / "lmdb" / split]
    if fmt == "rec":
        return [root / "rec" / f"{split}.{ext}" for ext in ("rec", "idx", "lst")]
    if fmt == "tar":
        return [root / "tar" / split]
    raise ValueError(f"unknown packed format {fmt!r} (known: lmdb, rec, tar)")


def open_writer(fmt: str, root: str | os.PathLike, split: str = "train", fsync: bool = False, maxcount: int = 1000) -> _Writer:
    """A writer of `fmt` placing its output at `packed_paths(root, fmt, split)`."""
    root = Path(root)
    if fmt == "lmdb":
        return LmdbWriter(root / "lmdb" / split, fsync=fsync)
    if fmt == "rec":
        return RecordIOWriter(root / "rec" / split, fsync=fsync)
    if fmt == "tar":
        return TarShardWriter(root / "tar" / split, prefix=split, maxcount=maxcount, fsync=fsync)
    raise ValueError(f"unknown packed format {fmt!r} (known: lmdb, rec, tar)")


# ---------------------------------------------------------------- readers
class _PerProcessFds:
    """File descriptors opened lazily and reopened after a fork (a worker must not share offsets)."""

    def __init__(self):
        self._pid = -1
        self._fds: dict[str, int] = {}

    def get(self, path: str) -> int:
        fd = self._fds.get(path) if self._pid == os.getpid() else None
        if fd is not None:
            return fd
        with _open_lock:  # read-ahead threads (torch_common.ImageSamples) may ask at once
            if self._pid != os.getpid():
                self._fds = {}
                self._pid = os.getpid()
            fd = self._fds.get(path)
            if fd is None:
                fd = os.open(path, os.O_RDONLY)
                self._fds[path] = fd
            return fd

    def close(self) -> None:
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)
        self._fds = {}


class _Reader(Sequence):
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fds"] = _PerProcessFds()
        return state

    @abstractmethod
    def files(self) -> list[Path]:
        """Every file a pass over this dataset reads."""


class ImageFolder(_Reader):
    """`<root>/<class>/<image>`: labels are the indices of the sorted class folders."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._root = str(self.root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"no image folder at {self.root}")
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        self.samples: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            entries = sorted(
                e.name for e in os.scandir(self.root / name) if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS)
            )
            self.samples.extend((f"{name}/{f}", label) for f in entries)
        self._fds = _PerProcessFds()

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> Record:
        rel, label = self.samples[i]
        return read_file(os.path.join(self._root, rel)), label

    def relpath(self, i: int) -> str:
        return self.samples[i][0]

    def files(self) -> list[Path]:
        return [self.root / rel for rel, _ in self.samples]


def read_file(path: str) -> bytes:
    """A whole file's bytes in four system calls (open, fstat, read, close). `open(path, "rb").read()`
    makes nine (an isatty ioctl, two lseeks, a second fstat, a read to find the end) through a
    buffered reader: about 20 us more CPU per 110 KB JPEG a worker reads from the page cache, 1% of
    its decode on the dev host; with twelve workers on an H200 their work beyond decoding fell from
    7-8% to 3-6% of it (docs/PERFORMANCE.md, "Harness fidelity")."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)  # a regular file reads whole; one byte more tells it grew
        if len(data) != size:  # grew or shrank since fstat, or a short read: on to the end
            chunks = [data]
            while more := os.read(fd, 1 << 16):
                chunks.append(more)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


_lmdb_envs: dict[tuple[int, str], object] = {}
_open_lock = threading.Lock()  # guards the per-process readers' lazy opening


def _new_open_lock() -> None:
    global _open_lock
    _open_lock = threading.Lock()  # a fork while another thread held it must not leave it held


os.register_at_fork(after_in_child=_new_open_lock)

_read_pools: dict[tuple[int, int], Any] = {}  # (pid, threads) -> this process's read-ahead pool


def read_ahead(read: Callable[[Any], Any], items: Iterable[Any], threads: int) -> Iterator[Any]:
    """`read(item)` for every item, in order, with up to `threads` reads in flight ahead of the
    caller, so a cold read's latency overlaps the caller's work on the items before it. One thread
    pool per process and size, made on first use (a forked worker makes its own)."""
    if threads <= 0:
        return map(read, items)
    key = (os.getpid(), int(threads))
    pool = _read_pools.get(key)
    if pool is None:
        with _open_lock:
            pool = _read_pools.get(key)
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor

                if any(pid != key[0] for pid, _ in _read_pools):  # inherited through fork: no threads here
                    _read_pools.clear()
                pool = _read_pools[key] = ThreadPoolExecutor(key[1], thread_name_prefix="read-ahead")
    return pool.map(read, items)


def _lmdb_env(path: Path, readahead: bool):
    """One read-only environment per path and process (lmdb refuses a second open in a process)."""
    key = (os.getpid(), str(path.resolve()))
    env = _lmdb_envs.get(key)
    if env is not None:
        return env
    with _open_lock:  # two threads must not both open it
        env = _lmdb_envs.get(key)
        if env is not None:
            return env
        import lmdb

        if any(pid != key[0] for pid, _ in _lmdb_envs):  # inherited through fork: unusable here
            _lmdb_envs.clear()
        # lock=False: readers never write, and sizer's workers may lack write access to lock.mdb.
        env = lmdb.open(str(path), readonly=True, lock=False, readahead=readahead, subdir=True, max_readers=512)
        _lmdb_envs[key] = env
    return env


def close_lmdb_envs(path: str | os.PathLike | None = None) -> None:
    """Close this process's cached read-only environments (of `path`, or all)."""
    want = None if path is None else str(Path(path).resolve())
    for key, env in list(_lmdb_envs.items()):
        if want is None or key[1] == want:
            if key[0] == os.getpid():
                env.close()
            del _lmdb_envs[key]


class LmdbReader(_Reader):
    """Records of a convert_imageset LMDB, in key order."""

    def __init__(self, path: str | os.PathLike, readahead: bool = False):
        self.path = Path(path)
        if not (self.path / "data.mdb").is_file():
            raise FileNotFoundError(f"no LMDB environment (data.mdb) at {self.path}")
        self.readahead = readahead
        env = self._open()
        with env.begin() as txn:
            self.keys = [bytes(k) for k in txn.cursor().iternext(keys=True, values=False)]
        self._fds = _PerProcessFds()

    def _open(self):
        return _lmdb_env(self.path, self.readahead)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Record:
        with self._open().begin(buffers=False) as txn:
            raw = txn.get(self.keys[i])
        datum = decode_datum(raw)
        return datum["data"], datum["label"]

    def datum(self, i: int) -> dict:
        with self._open().begin() as txn:
            return decode_datum(txn.get(self.keys[i]))

    def files(self) -> list[Path]:
        return [self.path / "data.mdb"]


class RecordIOReader(_Reader):
    """Records of an im2rec `.rec`, in `.idx` order."""

    def __init__(self, rec: str | os.PathLike, idx: str | os.PathLike | None = None):
        self.rec = Path(rec)
        self.idx = Path(idx) if idx is not None else self.rec.with_suffix(".idx")
        for p in (self.rec, self.idx):
            if not p.is_file():
                raise FileNotFoundError(f"missing RecordIO file {p}")
        self.ids: list[int] = []
        self.offsets: list[int] = []
        for line in self.idx.read_text().splitlines():
            if line.strip():
                rid, pos = line.split("\t")
                self.ids.append(int(rid))
                self.offsets.append(int(pos))
        self._fds = _PerProcessFds()

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> tuple[dict, bytes]:
        payload, _ = read_recordio_at(self._fds.get(str(self.rec)), self.offsets[i])
        return unpack_irheader(payload)

    def __getitem__(self, i: int) -> Record:
        header, data = self.record(i)
        label = header["label"][0] if header["flag"] > 0 else header["label"]
        return data, int(round(label))

    def files(self) -> list[Path]:
        return [self.rec, self.idx]


class TarShardReader(_Reader):
    """Samples of WebDataset tar shards in a directory; an index of (shard, offset, size, label) is
    built once by walking the tar headers, then every read is one pread."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.shards = sorted(p for p in self.directory.glob("*.tar") if p.is_file()) if self.directory.is_dir() else []
        if not self.shards:
            raise FileNotFoundError(f"no .tar shards in {self.directory}")
        self.index: list[tuple[int, int, int, int]] = []
        self.keys: list[str] = []
        for shard_no, shard in enumerate(self.shards):
            pending: dict[str, dict] = {}
            with tarfile.open(shard, "r:") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    base = member.name.rsplit("/", 1)[-1]
                    key, _, ext = base.partition(".")
                    key = member.name[: len(member.name) - len(base)] + key
                    entry = pending.setdefault(key, {})
                    if ext.lower() in ("jpg", "jpeg", "png"):
                        entry["image"] = (member.offset_data, member.size)
                    elif ext == "cls":
                        entry["label"] = int(tar.extractfile(member).read().decode().strip())
            for key, entry in pending.items():  # dicts keep insertion (shard) order
                if "image" in entry and "label" in entry:
                    self.index.append((shard_no, entry["image"][0], entry["image"][1], entry["label"]))
                    self.keys.append(key)
        self._fds = _PerProcessFds()

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> Record:
        shard, offset, size, label = self.index[i]
        return os.pread(self._fds.get(str(self.shards[shard])), size, offset), label

    def files(self) -> list[Path]:
        return list(self.shards)


def open_packed(root: str | os.PathLike, fmt: str, split: str = "train") -> _Reader:
    """A reader of the packed split at `packed_paths(root, fmt, split)`."""
    paths = packed_paths(root, fmt, split)
    if fmt == "lmdb":
        return LmdbReader(paths[0])
    if fmt == "rec":
        return RecordIOReader(paths[0], paths[1])
    return TarShardReader(paths[0])


def open_image_dataset(data_dir: str | os.PathLike, fmt: str = "files", split: str = "train") -> Sequence[Record]:
    """The (JPEG bytes, label) records of a dataset directory in one format: `files` reads
    `<data_dir>/<split>/<class>/...`, the packed formats read `<data_dir>/packed/...`."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown image format {fmt!r} (known: {', '.join(FORMATS)})")
    data_dir = Path(data_dir)
    if fmt == "files":
        return ImageFolder(data_dir / split)
    return open_packed(data_dir / "packed", fmt, split)


def dataset_files(data_dir: str | os.PathLike, fmt: str = "files", split: str = "train") -> list[Path]:
    """Every file a pass over the split reads (so its pages can be evicted before a point)."""
    return open_image_dataset(data_dir, fmt, split).files()


def dataset_bytes(data_dir: str | os.PathLike, fmt: str = "files", split: str = "train") -> int:
    return sum(p.stat().st_size for p in dataset_files(data_dir, fmt, split))


def pack_records(records: Iterable[tuple[str, bytes, int]], writer: _Writer) -> int:
    """Write (key, JPEG bytes, label) records with `writer`, then close it; returns the count."""
    with writer:
        for key, data, label in records:
            writer.write(key, data, label)
    return writer.count
