"""Readers of an image dataset's (JPEG bytes, label) records with random access: an ImageNet-style
folder or a packed split (LMDB, RecordIO, tar shards), and the reading they share (a whole file in
a few system calls, reads ahead on a thread pool).

Readers open their files lazily in each process (DataLoader workers are forked) and read with
pread, so one reader object serves many workers. Standard library only, plus lmdb (imported when
used).
"""

from __future__ import annotations

import os
import tarfile
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from workloads.formats.records import decode_datum, read_recordio_at, unpack_irheader

FORMATS = ("files", "lmdb", "rec", "tar")
# What reading or writing a format imports beyond the standard library.
FORMAT_MODULES = {"lmdb": ("lmdb",)}


def with_format_modules(modules: tuple[str, ...], fmt: Any) -> tuple[str, ...]:
    """`modules` and those reading or writing format `fmt` needs (`Workload.modules_for`)."""
    return tuple(dict.fromkeys(modules + FORMAT_MODULES.get(str(fmt), ())))
IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")

Record = tuple[bytes, int]


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


class _PerProcessFds:
    """File descriptors opened lazily and reopened after a fork (a worker must not share offsets)."""

    def __init__(self):
        self._pid = -1
        self._fds: dict[str, int] = {}

    def get(self, path: str) -> int:
        fd = self._fds.get(path) if self._pid == os.getpid() else None
        if fd is not None:
            return fd
        with _open_lock:  # read-ahead threads (workloads.image_loader.ImageSamples) may ask at once
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


class _Reader(Sequence[Record]):
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fds"] = _PerProcessFds()
        return state

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...

    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return [self._record(j) for j in range(*i.indices(len(self)))]
        return self._record(i)

    @abstractmethod
    def _record(self, i: int) -> Record:
        """Record `i` (JPEG bytes, label); negative `i` counts from the end."""

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

    def _record(self, i: int) -> Record:
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
    its decode; with twelve workers on an H200 host their work beyond decoding is 3-6% of it read
    this way, 7-8% read through `open` (docs/PERFORMANCE.md, "Pipeline fidelity")."""
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


_lmdb_envs: dict[tuple[int, str], Any] = {}  # (pid, path) -> lmdb.Environment
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

    def _record(self, i: int) -> Record:
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

    def _record(self, i: int) -> Record:
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
        self.entries: list[tuple[int, int, int, int]] = []
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
                        member_file = tar.extractfile(member)
                        assert member_file is not None  # a regular file (isfile() above) always has one
                        entry["label"] = int(member_file.read().decode().strip())
            for key, entry in pending.items():  # dicts keep insertion (shard) order
                if "image" in entry and "label" in entry:
                    self.entries.append((shard_no, entry["image"][0], entry["image"][1], entry["label"]))
                    self.keys.append(key)
        self._fds = _PerProcessFds()

    def __len__(self) -> int:
        return len(self.entries)

    def _record(self, i: int) -> Record:
        shard, offset, size, label = self.entries[i]
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


def open_image_dataset(data_dir: str | os.PathLike, fmt: str = "files", split: str = "train") -> _Reader:
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
